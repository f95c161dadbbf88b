"""The TorchDynamo backend: `torch.compile(model, backend="optim", options={...})`.

Registered through the package's entry point (group `torch_dynamo_backends`, name `optim`), so no
`import optim` is needed once optim is installed. Dynamo calls the backend once per captured graph; each
graph gets a GraphRunner that compiles it on its first call (FX -> ONNX -> optimize -> [int8] -> OptimEP)
and runs it on OptimEP from then on; a graph that cannot run there runs eagerly, with a warning and the
reason in the report. Graph breaks are Dynamo's: the Python between graphs runs as usual.
"""

from __future__ import annotations

import threading

import torch

from .capture import plan_slots
from .options import BackendOptions, OptionsError, calibration_samples, parse_options
from .report import TorchReport
from .reuse import CompileCache
from .runner import GraphRunner


def _frame() -> tuple[str, list[str]]:
    """The name and argument names (without a module's `self`) of the function Dynamo is capturing."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        code = tx.f_code
    except Exception:  # noqa: BLE001 - Dynamo internals; calibration then reaches no graph
        return "?", []
    names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    first = getattr(tx, "f_locals", {}).get(names[0]) if names else None
    if names and (isinstance(first, torch.nn.Module) or names[0] == "self"):
        names = names[1:]
    return code.co_name, names


class OptimBackend:
    """A Dynamo backend callable. The module-level `optim_backend` is what the entry point names; it reads
    the options torch.compile passes. accelerate() makes its own, with fixed options and its own report."""

    __name__ = "optim"  # Dynamo names the backend by it in its errors

    def __init__(self, options: BackendOptions | None = None, report: TorchReport | None = None):
        self.options = options
        self.report = report
        self.runners: list[GraphRunner] = []
        self._samples: dict[int, tuple[object, list]] = {}
        self._lock = threading.Lock()
        self._cache = CompileCache()

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list, options=None, mode=None, **unexpected):
        if unexpected:
            raise OptionsError(f"the optim backend takes options={{...}}, not {', '.join(sorted(unexpected))}")
        if mode not in (None, "default"):
            raise OptionsError(f"mode={mode!r} is for inductor; the optim backend takes options={{...}} instead")
        chosen = self.options if options is None and self.options is not None else parse_options(options)
        runner = GraphRunner(gm, plan_slots(gm, example_inputs), chosen, _frame(), lambda: self._calibration(chosen),
                             self.report, self._cache)
        if self.report is not None:  # accelerate() saves its graphs; the shared backend keeps none alive
            self.runners.append(runner)
        return runner

    def _calibration(self, options: BackendOptions) -> list:
        """The samples of options.calib, drained once (an iterator cannot be read twice) and kept."""
        with self._lock:
            key = id(options.calib)
            if key not in self._samples:
                self._samples[key] = (options.calib, calibration_samples(options.calib))
            return self._samples[key][1]


optim_backend = OptimBackend()
