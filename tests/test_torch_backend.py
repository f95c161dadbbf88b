"""torch.compile(model, backend="optim"): the zoo and MiniLM match eager PyTorch (fp32 within the float
tolerance, int8 within INT8_MIN_COSINE), graph breaks, dynamic batch (one compile per shape class), bad
options in one sentence, the entry point in a fresh process that never imports optim (OPTIM_LOG=1: one line
per compile), gradients and training mode as documented."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import optim.torch
from helpers import assert_close
from optim.models import ZOO, example_inputs, get

INT8_MIN_COSINE = 0.99  # int8 vs eager fp32 outputs of the zoo's small models (the quantizer's default goal)
MINILM_ATOL = 1e-4  # unit-norm embeddings (components around 0.05), OptimEP fp32 vs eager
MIN_ON_OPTIMEP = 0.95  # share of each compiled graph's ONNX nodes on OptimEP


def _inputs(name: str, seed: int = 0, batch: int | None = None) -> tuple[torch.Tensor, ...]:
    feeds = example_inputs(name, seed)
    if batch is not None:
        feeds = {k: np.concatenate([v] * batch) for k, v in feeds.items()}
    return tuple(torch.from_numpy(v) for v in feeds.values())


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


def _compiled_graphs(since: int) -> list:
    return optim.torch.last_report().graphs[since:]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # compiled frames of one test must not serve the next
    yield


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_fp32_runs_on_optimep_and_matches_eager(name):
    model = get(name).factory()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for seed in (0, 1):  # the second call reuses the compiled graph
            args = _inputs(name, seed)
            assert_close(compiled(*args).numpy(), model(*args).numpy(), what=f"{name} seed {seed}")
    (graph,) = _compiled_graphs(before)
    assert graph.runs_on == "OptimEP" and graph.mode == "fp32", graph.line()
    assert graph.placement.fraction >= MIN_ON_OPTIMEP, graph.placement.summary()
    assert set(graph.seconds) == {"capture", "optimize", "session"}


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_zoo_int8_is_quantized_and_within_budget(name):
    model = get(name).factory()
    calib = [_inputs(name, seed) for seed in range(100, 110)]
    compiled = torch.compile(model, backend="optim", options={"quantize": "int8", "calib": calib})
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        args = _inputs(name, 0, batch=4)
        ours, eager = compiled(*args), model(*args)
    assert _cosine(ours, eager) >= INT8_MIN_COSINE
    (graph,) = _compiled_graphs(before)
    assert graph.mode == "int8" and graph.placement.integer_units > 0, graph.line()
    assert graph.accuracy and all(row.cosine >= INT8_MIN_COSINE for row in graph.accuracy), graph.accuracy
    assert "quantize" in graph.seconds


@pytest.mark.slow
def test_minilm_matches_eager():
    from optim.models import minilm

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = minilm.build()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for sentences in (minilm.SENTENCES[:3], minilm.SENTENCES[3:5]):
            feeds = minilm.tokenize(sentences, length=None)  # padded to the longest: the mask matters
            args = (torch.from_numpy(feeds["input_ids"]), torch.from_numpy(feeds["attention_mask"]))
            assert_close(compiled(*args).numpy(), model(*args).numpy(), atol=MINILM_ATOL, what="embeddings")
    graphs = _compiled_graphs(before)
    assert graphs and all(g.runs_on == "OptimEP" for g in graphs), optim.torch.last_report().summary()


class _BranchOnItem(torch.nn.Module):
    """A Python branch on a value read with .item(): Dynamo breaks the graph there."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(16, 16)
        self.up, self.down = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)

    def forward(self, x):
        h = torch.relu(self.first(x))
        if h.mean().item() > 0.3:
            return self.up(h)
        return self.down(h) * 2


def test_graph_break_falls_back_to_python_between_graphs_on_optimep():
    model = _BranchOnItem().eval()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for scale in (0.1, 10.0):  # one input for each branch
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1)) * scale
            assert_close(compiled(x).numpy(), model(x).numpy(), what=f"scale {scale}")
    graphs = _compiled_graphs(before)
    assert len(graphs) == 3 and all(g.runs_on == "OptimEP" for g in graphs), optim.torch.last_report().summary()


def test_dynamic_batch_compiles_once_per_shape_class():
    model = get("cnn").factory()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for batch in (2, 3, 5, 8, 3):
            x = _inputs("cnn", batch, batch=batch)[0]
            assert_close(compiled(x).numpy(), model(x).numpy(), what=f"batch {batch}")
    static, dynamic = _compiled_graphs(before)  # Dynamo: the first size static, the second makes batch dynamic
    assert static.runs_on == dynamic.runs_on == "OptimEP"
    assert static.inputs["x"][0] == 2 and dynamic.inputs["x"][0] == "dyn", (static.inputs, dynamic.inputs)

    # Marked dynamic up front (torch._dynamo.mark_dynamic): one compile serves every batch size from 2 up.
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for batch in (2, 6, 4):
            x = _inputs("cnn", batch, batch=batch)[0]
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(compiled(x).numpy(), model(x).numpy(), what=f"marked dynamic, batch {batch}")
    (graph,) = _compiled_graphs(before)
    assert graph.runs_on == "OptimEP" and graph.inputs["x"][0] == "dyn", graph.line()


@pytest.mark.parametrize("options, says", [
    ({"quantize": "int4"}, "quantize must be None or 'int8', got 'int4'"),
    ({"quantise": "int8"}, "unknown option 'quantise' for the optim backend"),
    ({"quantize": "int8"}, "quantize='int8' needs calibration samples"),
    ({"threads": 0}, "threads must be a positive integer, got 0"),
    ({"quantize": "int8", "calib": [(torch.zeros(1, 64),)] * 2, "target": "cos>0.9"}, "target 'cos>0.9' is not"),
    ({"target": "cosine>=0.99"}, "target is an accuracy goal for quantize='int8'"),
    ({"precision": "fp16"}, "precision must be one of 'fp32', 'bf16', got 'fp16'"),
])
def test_bad_options_are_refused_in_one_sentence(options, says):
    compiled = torch.compile(get("mlp").factory(), backend="optim", options=options)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as caught:
        with torch.no_grad():
            compiled(torch.zeros(1, 64))
    inner = caught.value.inner_exception
    assert isinstance(inner, optim.torch.OptionsError)
    assert says in str(inner) and "\n" not in str(inner), str(inner)


def test_entry_point_works_without_importing_optim(tmp_path):
    script = textwrap.dedent("""
        import sys, torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
        x = torch.randn(3, 8)
        with torch.no_grad():
            ours, eager = torch.compile(model, backend="optim")(x), model(x)
        assert "optim.torch" in sys.modules, "the entry point did not load optim.torch"
        import optim.torch
        (graph,) = optim.torch.last_report().graphs
        assert graph.runs_on == "OptimEP", graph.line()
        print(float((ours - eager).abs().max()))
    """)
    env = dict(os.environ, OPTIM_LOG="1")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert float(run.stdout.strip().splitlines()[-1]) <= 1e-5
    logged = [line for line in run.stderr.splitlines() if line.startswith("optim.torch: graph ")]
    assert len(logged) == 1 and "ONNX nodes on OptimEP, fp32, compiled in" in logged[0], run.stderr[-3000:]


def test_a_forward_that_needs_gradients_runs_on_optimep_and_refuses_backward():
    model = get("mlp").factory()  # eval mode, weights requiring grad, no torch.no_grad(): many inference scripts
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    x = _inputs("mlp", 0)[0]
    out = compiled(x)
    assert_close(out.detach().numpy(), model(x).detach().numpy())
    assert out.requires_grad and _compiled_graphs(before)[0].runs_on == "OptimEP"
    with pytest.raises(RuntimeError, match="runs inference only"):
        out.sum().backward()
    assert all(p.grad is None for p in model.parameters())


def test_a_graph_in_training_mode_runs_eagerly_with_a_warning():
    eager, compiled_model = get("cnn").factory().train(), get("cnn").factory().train()
    compiled = torch.compile(compiled_model, backend="optim")
    x = _inputs("cnn", 0, batch=4)[0]
    with pytest.warns(UserWarning, match="runs in eager PyTorch: the graph updates an input, weight or buffer in place"):
        out = compiled(x)
    assert_close(out.detach().numpy(), eager(x).detach().numpy())
    # BatchNorm's running statistics moved exactly as eager's did: training was not silently skipped.
    for (name, ours), (_, theirs) in zip(compiled_model.named_buffers(), eager.named_buffers()):
        assert torch.allclose(ours, theirs), name


def test_calibration_samples_that_do_not_fit_are_refused_in_one_sentence():
    calib = [(torch.zeros(1, 64), torch.zeros(1, 64))] * 3  # mlp's forward takes one tensor
    compiled = torch.compile(get("mlp").factory(), backend="optim", options={"quantize": "int8", "calib": calib})
    with pytest.raises(optim.torch.OptionsError, match=r"^calib sample 0 has 2 inputs; the model's forward takes 1 \(x\)$"):
        with torch.no_grad():
            compiled(torch.zeros(1, 64))


def test_precision_bf16_reaches_the_sessions():
    """options={'precision': 'bf16'}: the graph's MatMuls run on OptimEP's bf16 GEMM where the CPU has one (within
    bf16 rounding of eager), and the option reaches the EP (a CPU without one refuses it in one sentence)."""
    from optim.ep_plugin.tools.doctor import bf16_kernel
    from optim.torch.options import parse_options

    assert parse_options({"precision": "bf16", "isa": "avx2"}).ep_options() == {"isa": "avx2", "precision": "bf16"}
    assert parse_options({"precision": "fp32"}).ep_options() == {}
    if not bf16_kernel("auto"):
        pytest.skip("this CPU has no bf16 GEMM: the option is refused by OptimEP (tests/ep/test_bf16.py)")
    model = get("mlp").factory()
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(model, backend="optim", options={"precision": "bf16"})
    with torch.no_grad():
        got, want = compiled(x), model(x)
    err = (got - want).abs().max().item() / want.abs().max().item()
    assert 0 < err < 2e-2, err  # bf16 ran (not float32's bits), within its rounding
