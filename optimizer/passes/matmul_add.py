"""MatMul followed by the Add of a constant bias fused into Gemm, where Gemm computes the same.

Only for a 2-D A and B: Gemm takes matrices. For the 3-D activations of transformers
(batch, sequence, features) a Reshape before and after would be needed, which adds two nodes for
the one it saves, so this pass leaves those alone (and says so).
"""

from __future__ import annotations

import onnx

from ..graph import GraphView
from ..rule import Match, Rule

_T = onnx.TensorProto
# Gemm's element types: floats since opset 7, integers since 11, bfloat16 since 13.
_GEMM_TYPES = {7: {_T.FLOAT, _T.DOUBLE, _T.FLOAT16}, 11: {_T.INT32, _T.INT64, _T.UINT32, _T.UINT64}, 13: {_T.BFLOAT16}}


class MatMulAddToGemm(Rule):
    name = "matmul_add_to_gemm"
    summary = "fuse MatMul + Add(constant bias) into Gemm for 2-D operands"
    anchors = frozenset({"Add"})

    def pattern(self, g: GraphView, node) -> Match | None:
        for k in (0, 1):
            matmul = g.producer_op(node.input[k], "MatMul")
            if matmul is not None:
                return Match([matmul, node], {"matmul": matmul, "add": node, "bias": node.input[1 - k]})
        return None

    def check(self, g: GraphView, m: Match) -> str | None:
        matmul, add = m["matmul"], m["add"]
        if g.opset() < 7:
            return f"opset {g.opset()} Gemm needs broadcast attributes; only opset 7+ is handled"
        problem = g.private_problem(matmul.output[0], add)
        if problem:
            return problem
        a, b = matmul.input
        for role, name in (("A", a), ("B", b)):
            rank = g.rank(name)
            if rank is None:
                return f"the rank of MatMul input {role} {name!r} is unknown"
            if rank != 2:
                return f"MatMul input {role} is {rank}-D; Gemm needs 2-D (a Reshape around it would add two nodes)"
        dtype = g.dtype(a)
        if not any(dtype in types for since, types in _GEMM_TYPES.items() if since <= g.opset()):
            kind = onnx.helper.tensor_dtype_to_string(dtype) if dtype else "unknown"
            return f"element type {kind} is not one Gemm takes at opset {g.opset()}"
        bias = g.constant(m["bias"])
        if bias is None:
            return f"bias {m['bias']!r} is not a constant"
        return _bias_problem(list(bias.shape), g.shape(a)[0], g.shape(b)[1])

    def rewrite(self, g: GraphView, m: Match) -> str:
        matmul, add = m["matmul"], m["add"]
        gemm = g.make_node("Gemm", [*matmul.input, m["bias"]], [add.output[0]], matmul)
        g.replace([matmul, add], [gemm])
        return f"MatMul + Add -> Gemm {gemm.name}"


def _bias_problem(bias: list[int], rows, cols) -> str | None:
    """Gemm broadcasts C one way to (M, N) and the Add's output must have exactly that shape, so
    the bias has at most 2 dims, each 1 or equal to the known M or N."""
    if len(bias) > 2:
        return f"bias is {len(bias)}-D: the Add's output would have more dims than Gemm's"
    for have, want, what in zip(reversed(bias), (cols, rows), ("N", "M")):
        if have != 1 and have != want:
            return f"bias dim {have} does not broadcast to {what}={want if isinstance(want, int) else 'unknown'}"
    return None
