"""`optim.torch.accelerate(model, example_inputs)`: the explicit form of torch.compile(backend="optim"), an
nn.Module whose forward runs the model's graphs on OptimEP, compiled before it returns."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .backend import OptimBackend
from .options import OptionsError, parse_options
from .report import TorchReport


class Accelerated(torch.nn.Module):
    """The model, compiled for OptimEP. `forward` runs the compiled graphs; `model` is the original
    (its parameters are this module's, so `state_dict()` has the original's keys and `load_state_dict()`
    makes the next call recompile with the new weights). `report` lists its graphs; `save(dir)` writes
    them as ONNX. It cannot be pickled (it holds ONNX Runtime sessions): save `state_dict()` instead."""

    def __init__(self, model: torch.nn.Module, backend: OptimBackend):
        super().__init__()
        self.model = model
        # Not a submodule: torch.compile's wrapper would list the model's weights a second time.
        self.__dict__["_compiled"] = torch.compile(model, backend=backend)
        self.__dict__["_backend"] = backend

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    @property
    def report(self) -> TorchReport:
        """This module's own compiles (optim.torch.last_report() lists every one in the process)."""
        return self._backend.report

    def state_dict(self, *args, **kwargs):
        return self.model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    def save(self, directory: str | Path) -> list[Path]:
        """Writes each graph that runs on OptimEP as `graph_<i>.onnx` (optimized, int8 when quantized; one
        graph is the whole model unless it has graph breaks) and `report.json`; returns the ONNX paths."""
        from optim.optimizer.model_io import save_model

        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for i, runner in enumerate(r for r in self._backend.runners if r.compiled is not None):
            path = folder / f"graph_{i}.onnx"
            save_model(runner.compiled.model, path)
            written.append(path)
        (folder / "report.json").write_text(json.dumps(self.report.to_dict(), indent=2, default=str))
        return written

    def __reduce_ex__(self, protocol):
        raise TypeError("an accelerated model holds ONNX Runtime sessions and cannot be pickled: torch.save its "
                        "state_dict() (the original model's) and call accelerate() again after loading, or use "
                        ".save(dir) for the ONNX files")


def _max_error(expected, got) -> float:
    pairs = zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got))
    errors = [(e.double() - g.double()).abs().max().item() for e, g in pairs
              if isinstance(e, torch.Tensor) and e.is_floating_point() and e.numel()]
    return max(errors, default=0.0)


def accelerate(model: torch.nn.Module, example_inputs, *, quantize: str | None = None, calib=None,
               threads: int | None = None, target: str | None = None, op_types=None, isa: str = "auto",
               dynamic_batch: bool = False) -> Accelerated:
    """`model` (put in eval mode) compiled for OptimEP on `example_inputs` (a tuple of its forward's
    arguments, or one tensor) before returning; options as torch.compile's (see optim.torch.options).

    dynamic_batch: compile with the first dim of every example tensor dynamic (torch._dynamo.mark_dynamic), so
    one compile serves every batch size from 2 up; otherwise Dynamo makes a dim dynamic when a second size
    arrives (one more compile). The result's `example_error` is the largest absolute difference
    from eager PyTorch on the example inputs. Inference only (see optim.torch)."""
    if not isinstance(model, torch.nn.Module):
        raise OptionsError(f"accelerate() takes an nn.Module, got {type(model).__name__}")
    given = {"quantize": quantize, "calib": calib, "threads": threads, "target": target, "op_types": op_types,
             "isa": isa}
    options = parse_options({k: v for k, v in given.items() if v is not None})
    args = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    model.eval()
    if dynamic_batch:
        for t in args:
            if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] >= 2:
                torch._dynamo.mark_dynamic(t, 0)
    accelerated = Accelerated(model, OptimBackend(options, TorchReport()))
    with torch.no_grad():
        expected = model(*args)
        got = accelerated(*args)
    accelerated.example_error = _max_error(expected, got)
    return accelerated
