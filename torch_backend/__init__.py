"""optim from PyTorch: `torch.compile(model, backend="optim")` and `optim.torch.accelerate(model, inputs)`.

    import torch
    fast = torch.compile(model, backend="optim")                  # no `import optim` needed (entry point)
    fast = torch.compile(model, backend="optim", options={"quantize": "int8", "calib": samples})
    out = fast(x)

    import optim.torch
    acc = optim.torch.accelerate(model, (x,))                     # an nn.Module; acc.save("dir/") writes ONNX
    print(optim.torch.last_report().summary())                    # graphs, placement, compile time, accuracy

Inference only: OptimEP computes no gradients. Outputs of a forward whose inputs or weights require
gradients (a model in eval mode run without torch.no_grad()) are OptimEP's, and a backward pass through
them raises one sentence; a graph in training mode (BatchNorm updating its statistics, Dropout) runs
eagerly with a warning. This package imports torch; `import optim` does not.

Dynamic sizes: a dim Dynamo makes dynamic (`dynamic=True`, `torch._dynamo.mark_dynamic`, or a second size seen)
is exported dynamic, so one OptimEP session serves every size; a module's float attributes (a LayerNorm's eps),
which `dynamic=True` passes as tensors, are baked in. Where torch.export cannot keep a dim dynamic (a size that
decides control flow or is read from data), the graph runs in eager PyTorch with a warning that says so: compile
without `dynamic=True` and Dynamo captures one graph per size, each on OptimEP. Graphs Dynamo captures again
only because the grad mode changed (`no_grad` / `inference_mode`) share one compile.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("optim.torch needs PyTorch: pip install 'optim[torch]'") from None

from .accelerate import Accelerated, accelerate
from .backend import OptimBackend, optim_backend
from .capture import CaptureRefused
from .options import OptionsError
from .report import GraphReport, TorchReport, last_report, reset_report
from .runner import INFERENCE_ONLY

__all__ = ["INFERENCE_ONLY", "Accelerated", "CaptureRefused", "GraphReport", "OptimBackend", "OptionsError",
           "TorchReport", "accelerate", "last_report", "optim_backend", "reset_report"]
