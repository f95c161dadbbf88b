"""optim.torch says what it really does: the precision each graph runs in, the user's logging left alone,
dynamic=True on OptimEP, one compile across grad modes, calibration mistakes in the backend's own terms."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import optim.torch
from helpers import assert_close
from optim.torch import compile as compile_module

INT8_MIN_COSINE = 0.99  # int8 vs eager fp32 of these small random models (the quantizer's default goal)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # compiled frames of one test must not serve the next
    yield


def _graphs(since: int) -> list:
    return optim.torch.last_report().graphs[since:]


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


def _sequential() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 14 * 14, 10)).eval()


def _images(n: int, batch: int = 1, size: int = 16) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(batch, 3, size, size, generator=g),) for _ in range(n)]


def test_sequential_is_quantized_when_int8_is_asked():
    """nn.Sequential has no forward of its own: Dynamo captures its wrapper inner(*args), whose inputs are
    positions in *args, which the calibration samples now reach."""
    model = _sequential()
    compiled = torch.compile(model, backend="optim", options={"quantize": "int8", "calib": _images(8)})
    before = optim.torch.last_report().compiles
    (x,) = _images(1, batch=2)[0]
    with torch.no_grad():
        assert _cosine(compiled(x), model(x)) >= INT8_MIN_COSINE
    (graph,) = _graphs(before)
    assert graph.mode == "int8" and graph.placement.integer_units > 0, graph.line()
    assert ", int8, cosine vs fp32" in graph.line()


class _Break(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        y = self.a(x)
        torch._dynamo.graph_break()
        return self.b(y)


def test_a_graph_after_a_break_says_float32_and_warns_once(monkeypatch):
    monkeypatch.setattr(compile_module, "_warned_float", False)
    calib = [(torch.randn(2, 16),) for _ in range(6)]
    compiled = torch.compile(_Break().eval(), backend="optim", options={"quantize": "int8", "calib": calib})
    before = optim.torch.last_report().compiles
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        compiled(torch.randn(2, 16))
        torch._dynamo.reset()
        compiled = torch.compile(_Break().eval(), backend="optim", options={"quantize": "int8", "calib": calib})
        compiled(torch.randn(2, 16))  # a second float graph: no second warning
    first, after_break, *_ = _graphs(before)
    assert first.mode == "int8", first.line()
    assert after_break.mode == "fp32" and ", fp32, compiled" in after_break.line(), after_break.line()
    assert any(n.startswith("int8 was asked, but it runs in float32: it starts after a graph break")
               for n in after_break.notes), after_break.notes
    said = [str(w.message) for w in caught if "int8 was asked" in str(w.message)]
    assert len(said) == 1 and f"graph {after_break.index} " in said[0], said


def test_an_int8_compile_leaves_the_root_logger_alone():
    handlers = list(logging.root.handlers)
    compiled = torch.compile(_sequential(), backend="optim", options={"quantize": "int8", "calib": _images(6)})
    with torch.no_grad():
        compiled(_images(1)[0][0])
    assert logging.root.handlers == handlers


def test_optim_log_lines_print_once_beside_a_users_basicconfig(tmp_path):
    script = tmp_path / "log_once.py"
    script.write_text(textwrap.dedent("""
        import logging, torch
        logging.basicConfig(level=logging.INFO, format="user: %(name)s %(message)s")
        m = torch.nn.Sequential(torch.nn.Linear(8, 4)).eval()
        calib = [(torch.randn(1, 8),) for _ in range(6)]
        c = torch.compile(m, backend="optim", options={"quantize": "int8", "calib": calib})
        with torch.no_grad():
            c(torch.randn(1, 8))
        logging.getLogger("app").info("after")
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OPTIM_LOG": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "ONNX nodes on OptimEP" in line]
    assert len(lines) == 1 and lines[0].startswith("optim.torch: graph 0"), done.stderr[-2000:]
    assert "user: app after" in done.stderr  # the user's basicConfig took effect


class _ConvNorm(torch.nn.Module):
    """A convolution (its channel dim pinned by the weight), a LayerNorm and a Dropout (float attributes, which
    dynamic=True passes as tensors read with .item())."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.norm, self.drop = torch.nn.Conv2d(3, 8, 3), torch.nn.LayerNorm(8), torch.nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.norm(self.conv(x).mean((2, 3))))


def test_dynamic_true_runs_on_optimep_with_one_compile():
    model = _ConvNorm().eval()
    compiled = torch.compile(model, backend="optim", dynamic=True)
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        for batch, size in ((2, 16), (3, 20), (4, 24)):  # (Dynamo specializes a size of 1: not used here)
            (x,) = _images(1, batch, size)[0]
            assert_close(compiled(x).numpy(), model(x).numpy(), what=f"batch {batch} size {size}")
        (graph,) = _graphs(before)
        model.norm.eps = 0.5  # a baked float attribute changed: not the old value (Dynamo or the runner recompiles)
        (x,) = _images(1, 2, 16)[0]
        assert_close(compiled(x).numpy(), model(x).numpy(), what="eps 0.5")
    assert graph.runs_on == "OptimEP" and graph.inputs["x"] == ["dyn", 3, "dyn", "dyn"], graph.line()


def test_a_dynamic_graph_torch_cannot_export_says_what_to_do():
    from optim.torch.capture import Plan
    from optim.torch.runner import _eager_reason

    plan = Plan(names=["x"], dynamic_axes=[[0, 2]])
    error = torch._dynamo.exc.UserError(torch._dynamo.exc.UserErrorType.CONSTRAINT_VIOLATION, "Constraints violated")
    reason = _eager_reason(error, plan)
    assert reason.startswith("torch.export could not keep its dynamic sizes (x dim 0, 2) dynamic (UserError: ")
    assert reason.endswith("compile without dynamic=True and Dynamo captures one graph per size, each on OptimEP "
                           "(optim.torch: Dynamic sizes)")
    assert _eager_reason(ValueError("bad"), plan) == "ValueError: bad"  # not torch's: said as it is


def test_grad_mode_changes_share_one_compile():
    model = _sequential()
    compiled = torch.compile(model, backend="optim")
    before = optim.torch.last_report().compiles
    (x,) = _images(1)[0]
    for mode in (torch.no_grad, torch.inference_mode, torch.enable_grad, torch.no_grad):
        with mode():
            got = compiled(x)
        assert_close(got.detach().numpy(), model(x).detach().numpy(), what=mode.__name__)
    (graph,) = _graphs(before)
    assert graph.runs_on == "OptimEP" and any("captured again by Dynamo" in n for n in graph.notes), graph.notes


@pytest.mark.parametrize("calib, says", [
    (_images(1), r"calib gave 1 sample\(s\); int8 needs at least 2: one in five \(at least one\) is held out"),
    ([(x[:, :, :, :16],) for (x,) in _images(4, size=17)],
     r"calib sample 0: input 'input_0' is 1x3x17x16, but the model was called with 2x3x16x16 and takes only size 16 "
     r"on dim 2; give samples of the sizes the model runs at"),
    (_images(4, size=17), r"calib sample 0 \('input_0' 1x3x17x17\) does not run through the model, which was called "
                          r"with 2x3x16x16: .*Gemm.*; give samples of the sizes the model runs at$"),
    ([(x[0],) for (x,) in _images(3)], r"calib sample 0: input 'input_0' is 3x16x16 \(3 dims\), but the model was called "
                                       r"with 2x3x16x16 \(4 dims\)"),
    ([(x.double(),) for (x,) in _images(3)], r"calib sample 0: input 'input_0' is float64, but the model was called with "
                                             r"float32"),
])
def test_calibration_mistakes_name_the_sample_and_dim(calib, says):
    compiled = torch.compile(_sequential(), backend="optim", options={"quantize": "int8", "calib": calib})
    with pytest.raises(optim.torch.OptionsError, match=f"^{says}"), torch.no_grad():
        compiled(_images(1, batch=2)[0][0])


def test_calibration_at_another_batch_size_still_quantizes():
    """Samples of batch 1 calibrate a graph called at batch 2: the batch dim becomes dynamic (not a mistake)."""
    compiled = torch.compile(_sequential(), backend="optim", options={"quantize": "int8", "calib": _images(6)})
    before = optim.torch.last_report().compiles
    with torch.no_grad():
        compiled(_images(1, batch=2)[0][0])
    (graph,) = _graphs(before)
    assert graph.mode == "int8", graph.line()
