"""The reference zoo: registry, deterministic factories, example inputs, and export of every entry."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import optim.models
from optim.models import ZOO, example_inputs, get

EXPECTED_OUTPUT_SHAPES = {"mlp": (1, 10), "cnn": (1, 10), "transformer": (1, 16, 64)}


def _torch_inputs(entry, seed=0):
    return {k: torch.from_numpy(v) for k, v in example_inputs(entry, seed).items()}


def test_importing_the_zoo_does_not_import_torch():
    # Runtime users have no torch: the registry and example inputs must work without it.
    package_root = Path(optim.models.__file__).parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), os.environ.get("PYTHONPATH", "")]))
    code = ("import sys, optim.models as m; m.get('cnn'); m.example_inputs('transformer'); "
            "assert 'torch' not in sys.modules, 'optim.models imported torch'")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


def test_registry_lists_the_three_models_and_names_them_on_a_typo():
    assert set(ZOO) == {"mlp", "cnn", "transformer"}
    assert all(get(name).name == name for name in ZOO)
    with pytest.raises(KeyError, match="the zoo has cnn, mlp, transformer"):
        get("alexnet")
    with pytest.raises(dataclasses.FrozenInstanceError):
        get("mlp").name = "other"


@pytest.mark.parametrize("name", sorted(ZOO))
def test_factory_is_deterministic_in_eval_mode_and_leaves_the_callers_rng_alone(name):
    entry = get(name)
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    first, second = entry.factory(), entry.factory()
    assert torch.equal(torch.random.get_rng_state(), before)
    assert not first.training and not any(m.training for m in first.modules())
    a, b = first.state_dict(), second.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_forward_gives_the_documented_shape_also_on_other_dynamic_sizes(name):
    entry = get(name)
    model = entry.factory()
    with torch.no_grad():
        out = model(**_torch_inputs(entry))
        assert tuple(out.shape) == EXPECTED_OUTPUT_SHAPES[name]
        assert torch.isfinite(out).all()
        # Grow every dynamic axis: the model must not depend on the example sizes.
        feeds = {}
        for input_name, shape, dtype in entry.inputs:
            shape = [s + 3 if axis in entry.dynamic.get(input_name, {}) else s for axis, s in enumerate(shape)]
            feeds[input_name] = torch.from_numpy(np.zeros(shape, dtype=dtype))
        assert model(**feeds).shape[0] == 4


def test_cnn_keeps_batchnorm_with_non_trivial_statistics_and_a_strided_projection():
    model = get("cnn").factory()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(norms) == 6  # stem, 2 per block, projection
    for bn in norms:
        assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))
        assert (bn.running_var > 0).all()
    projections = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (1, 1)]
    assert len(projections) == 1 and projections[0].stride == (2, 2)


def test_example_inputs_respect_dtype_shape_range_and_seed():
    ids = example_inputs("transformer")["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (1, 16)
    assert ids.min() >= 0 and ids.max() < 100
    x = example_inputs(get("cnn"))["x"]
    assert x.dtype == np.float32 and x.shape == (1, 3, 32, 32)
    assert np.array_equal(x, example_inputs("cnn", seed=0)["x"])
    assert not np.array_equal(x, example_inputs("cnn", seed=1)["x"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_exports_with_dynamo_and_verifies(name, tmp_path, capfd):
    from optim.exporter import export

    entry = get(name)
    result = export(name, tmp_path / f"{name}.onnx")
    assert (result.kind, result.exporter, result.opset) == ("zoo", "dynamo", 18)
    assert {row["check"] for row in result.report} == {"example", "resized"}
    assert result.passed
    out, err = capfd.readouterr()
    assert out == "" and err == "", "the exporters' chatter must be silenced"

    model = onnx.load(result.path)
    onnx.checker.check_model(model, full_check=True)
    graph_inputs = {i.name: i for i in model.graph.input}
    assert list(graph_inputs) == [n for n, _, _ in entry.inputs]
    for input_name, shape, dtype in entry.inputs:
        tensor = graph_inputs[input_name].type.tensor_type
        assert onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type) == np.dtype(dtype)
        dims = [d.dim_param or d.dim_value for d in tensor.shape.dim]
        assert dims == [entry.dynamic.get(input_name, {}).get(axis, size) for axis, size in enumerate(shape)]
    assert [o.name for o in model.graph.output] == ["output"]
    assert result.outputs[0]["shape"][0] == "batch"
