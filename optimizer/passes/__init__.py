"""The rewrite passes, one per file, in the order one round of the pass manager runs them.

Folding first exposes constants to the fusions; the fusions run before the cleanups that remove
what they leave behind. Each pass is safe on its own, so --skip/--only may pick any subset.
"""

from __future__ import annotations

from ..rule import Pass
from .constant_folding import FoldConstants
from .constant_if import InlineConstantIf
from .conv_bn import FoldConvBatchNorm
from .dead_nodes import RemoveDeadNodes
from .gelu import FuseGelu
from .identity import RemoveIdentity
from .layer_norm import FuseLayerNorm
from .matmul_add import MatMulAddToGemm
from .pad_conv import FoldPadIntoConv
from .reshape_shapes import ConstantReshapeShapes
from .reshapes import CollapseReshapes
from .share_initializers import ShareIdenticalInitializers
from .resize_sizes import ConstantResizeScales
from .transposes import CollapseTransposes
from .unused_initializers import RemoveUnusedInitializers

PASSES: tuple[type[Pass], ...] = (
    FoldConstants,
    InlineConstantIf,
    RemoveIdentity,
    FoldConvBatchNorm,
    FoldPadIntoConv,
    FuseLayerNorm,
    FuseGelu,
    MatMulAddToGemm,
    CollapseTransposes,
    ConstantReshapeShapes,
    ConstantResizeScales,
    CollapseReshapes,
    ShareIdenticalInitializers,
    RemoveDeadNodes,
    RemoveUnusedInitializers,
)

PASS_NAMES: tuple[str, ...] = tuple(p.name for p in PASSES)

__all__ = ["PASSES", "PASS_NAMES"] + [p.__name__ for p in PASSES]
