"""What the backend returns to Dynamo for one graph: compiles on the first call (outside Dynamo's own
tracing), then runs the OptimEP session on every call, torch tensors in and out without copies.

Weights are baked into the ONNX model: when a parameter or buffer changes (in-place, e.g.
load_state_dict, or replaced), the next call recompiles. Gradients: see _InferenceOnly."""

from __future__ import annotations

import threading
import warnings

import torch

from optim.optimizer.quantization import CalibrationError

from .capture import CaptureRefused
from .options import OptionsError
from .reuse import CompileCache, reuse_key
from .report import GraphReport, next_index, record
from .tensors import NUMPY_DTYPES, from_numpy, to_numpy

INFERENCE_ONLY = ("the optim backend runs inference only: this output was computed by OptimEP, which computes no "
                  "gradients; train without it and compile the trained model for inference (under torch.no_grad() "
                  "or torch.inference_mode())")


class _InferenceOnly(torch.autograd.Function):
    """Gives OptimEP's outputs a place in the autograd graph when their inputs require gradients (a model in
    eval mode run without torch.no_grad(), as many inference scripts do), so that they look like eager's
    outputs; a backward pass through them raises INFERENCE_ONLY instead of silently leaving the weights
    without gradients."""

    @staticmethod
    def forward(ctx, run, *anchors):
        outputs = run()
        ctx.mark_non_differentiable(*[o for o in outputs if not o.is_floating_point()])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(INFERENCE_ONLY)


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:  # inference tensors keep no version counter; they cannot be changed in place either
        return -1


class GraphRunner:
    """Callable for one Dynamo graph. `frame` (the function Dynamo captured it from and its argument
    names) lets calibration samples, given as the model's inputs, reach this graph's inputs."""

    def __init__(self, gm: torch.fx.GraphModule, plan, options, frame: tuple[str, list[str]], calibration,
                 own_report=None, cache: CompileCache | None = None):
        self.gm = gm
        self.plan = plan  # capture.Plan, read while Dynamo still had the placeholders' metadata
        self.options = options
        self.frame_name, self.frame_args = frame
        self._calibration = calibration  # () -> list of samples (the backend keeps them once drained)
        self._own_report = own_report
        self._cache = cache  # compiles of graphs with the same code, shared (see reuse.py)
        self.compiled = None  # CompiledGraph once on OptimEP
        self.eager_reason: str | None = None
        self.report: GraphReport | None = None
        self._weights: list[tuple[int, torch.Tensor, int]] = []
        self._scalars: list[tuple[int, float]] = []  # a module's float attribute baked into the model
        self._lock = threading.Lock()  # threads sharing a compiled model compile a graph once

    def __call__(self, *args):
        if self.eager_reason is None and (self.compiled is None or self.weights_changed(args)):
            with self._lock:
                if self.eager_reason is None and (self.compiled is None or self.weights_changed(args)):
                    self._compile(list(args))
        if self.eager_reason is not None:
            return self.gm(*args)
        needs_grad = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        if needs_grad:
            anchor = next(a for a in args if isinstance(a, torch.Tensor) and a.requires_grad)
            return _InferenceOnly.apply(lambda: self._run(args), anchor)
        return self._run(args)

    def _run(self, args) -> tuple:
        c = self.compiled
        feeds = {name: to_numpy(args[p]) for name, p in zip(self.plan.names, self._tensor_positions)}
        return tuple(from_numpy(o) for o in c.session.run(None, feeds))

    def weights_changed(self, args) -> bool:
        return (any(args[p] is not ref or _version(args[p]) != v for p, ref, v in self._weights)
                or any(args[p].item() != v for p, v in self._scalars))

    def _compile(self, args: list) -> None:
        from .compile import compile_graph

        key = None
        if self.compiled is None and self._cache is not None and not self.plan.refused:
            key = reuse_key(self.gm, self.plan, args, self.options, self.frame_name)
            twin = self._cache.find(key, args)
            if twin is not None:
                self._adopt(twin)
                return
        report = GraphReport(index=next_index(), name=self.frame_name,
                             fx_nodes=sum(1 for n in self.gm.graph.nodes if n.op == "call_function" or n.op == "call_method"
                                          or n.op == "call_module"),
                             inputs=_shapes(self.plan, args))  # mode: "int8" once the quantizer has run
        if self.compiled is not None:
            report.notes.append("recompiled: a parameter, buffer or float attribute changed since the last compile")
        try:
            self._check_dtypes(args)
            compiled = compile_graph(self.gm, self.plan, args, self.options, *self._graph_calibration(), report)
        except CaptureRefused as e:
            self._go_eager(report, str(e))
            return
        except (OptionsError, CalibrationError):
            report.runs_on, report.reason = "eager", "bad calibration samples"
            raise  # the user's to fix: one sentence, not a silent fallback
        except Exception as e:  # noqa: BLE001 - the exporter's or optimizer's: the graph still runs, eagerly
            self._go_eager(report, _eager_reason(e, self.plan))
            return
        finally:
            record(report, self._own_report)
        self.report, self.compiled = report, compiled
        self._tensor_positions = self.plan.tensor_positions
        self._weights = [(p, args[p], _version(args[p])) for p in self.plan.constant_positions]
        self._scalars = [(p, args[p].item()) for p in self.plan.scalar_positions]
        if key is not None:
            self._cache.add(key, self)

    def _adopt(self, twin: GraphRunner) -> None:
        """Runs on `twin`'s session: the same graph, captured again by Dynamo for a global flag's sake."""
        self.report, self.compiled = twin.report, twin.compiled
        self._tensor_positions, self._weights, self._scalars = twin._tensor_positions, twin._weights, twin._scalars
        note = "shared with the same graph captured again by Dynamo (grad mode or another global flag changed)"
        if note not in self.report.notes:
            self.report.notes.append(note)

    def _go_eager(self, report: GraphReport, reason: str) -> None:
        report.runs_on, report.reason = "eager", reason
        self.report, self.eager_reason, self.compiled = report, reason, None
        warnings.warn(f"optim: graph {report.index} ({report.name}) runs in eager PyTorch: {reason}", stacklevel=3)

    @staticmethod
    def _check_dtypes(args) -> None:
        for a in args:
            if isinstance(a, torch.Tensor) and a.dtype not in NUMPY_DTYPES:
                raise CaptureRefused(f"an input is {a.dtype}, which ONNX Runtime's Python API cannot take")

    def _graph_calibration(self) -> tuple[list[dict] | None, str]:
        """(the calibration samples as this graph's input batches, "") or (None, why they do not reach it)."""
        if self.options.quantize != "int8":
            return None, ""
        from .calibration import graph_batches

        return graph_batches(self.plan, self.frame_name, self.frame_args, self._calibration())


def _shapes(plan, args) -> dict[str, list]:
    """Each ONNX input's shape at this compile, "dyn" on its dynamic axes."""
    return {name: ["dyn" if a in axes else int(d) for a, d in enumerate(args[p].shape)]
            for name, p, axes in zip(plan.names, plan.tensor_positions, plan.dynamic_axes)}


def _eager_reason(error: Exception, plan) -> str:
    """The error's first line; for a graph with dynamic dims that torch refused, what to do instead."""
    reason = f"{type(error).__name__}: {_first_line(error)}"
    if plan.dynamic and type(error).__module__.startswith("torch"):
        dims = "; ".join(f"{name} dim {', '.join(map(str, axes))}" for name, axes in plan.dynamic.items())
        reason = (f"torch.export could not keep its dynamic sizes ({dims}) dynamic ({reason}); compile without "
                  "dynamic=True and Dynamo captures one graph per size, each on OptimEP (optim.torch: Dynamic sizes)")
    return reason


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
