"""A squeeze-excite's QMul folded into the 1x1 convolution that alone reads its output (rewrites/gate_fold.cc,
ops/gate_before.h): the projection reads the map and gates each block of its rows as it takes them. The folded
step must give the bytes of the same graph with the QMul's output kept (a graph output, which the fold leaves
alone), on every ISA, with a gate per image or one for all, uint8 or int8, and a residual Add folded in too."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, run_folded_and_apart

N = helper.make_node


def _model(*, c=40, cout=24, hw=23, batch=2, gate_batch=None, gate_type="u8", residual=False, keep_gated=False, seed=0):
    """x (u8) -> 3x3 depthwise QDQ conv -> map; sigmoid-like gate s (a graph input, [gate_batch, c, 1, 1]);
    QMul(map, s) -> 1x1 QDQ conv (c -> cout) [-> + 1x1 branch of x] -> y."""
    rng = np.random.default_rng(seed)
    gate_batch = batch if gate_batch is None else gate_batch
    g_np = np.uint8 if gate_type == "u8" else np.int8
    inits = {"xs": np.float32(0.03), "xz": np.uint8(100), "dw": rng.integers(-127, 128, (c, 1, 3, 3)).astype(np.int8),
             "dws": rng.uniform(0.002, 0.01, c).astype(np.float32), "dwz": np.zeros(c, np.int8),
             "ms": np.float32(0.04), "mz": np.uint8(10), "ss": np.float32(1 / 255), "sz": np.array(0 if gate_type == "u8" else -128, g_np),
             "gs": np.float32(0.03), "gz": np.uint8(5), "pw": rng.integers(-127, 128, (cout, c, 1, 1)).astype(np.int8),
             "pws": rng.uniform(0.002, 0.01, cout).astype(np.float32), "pwz": np.zeros(cout, np.int8),
             "ys": np.float32(0.08), "yz": np.uint8(128)}
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             N("DequantizeLinear", ["dw", "dws", "dwz"], ["dwf"], axis=0),
             N("Conv", ["xf", "dwf"], ["d"], group=c, pads=[1, 1, 1, 1], name="dw"), N("Relu", ["d"], ["dr"]),
             N("QuantizeLinear", ["dr", "ms", "mz"], ["map"]), N("DequantizeLinear", ["map", "ms", "mz"], ["mapf"]),
             N("DequantizeLinear", ["s", "ss", "sz"], ["sf"]), N("Mul", ["mapf", "sf"], ["gm"], name="gate"),
             N("QuantizeLinear", ["gm", "gs", "gz"], ["gated"]), N("DequantizeLinear", ["gated", "gs", "gz"], ["gatedf"]),
             N("DequantizeLinear", ["pw", "pws", "pwz"], ["pwf"], axis=0), N("Conv", ["gatedf", "pwf"], ["p"], name="project")]
    if residual:
        inits.update({"w1": rng.integers(-127, 128, (cout, c, 1, 1)).astype(np.int8), "w1s": np.float32(0.003)})
        nodes += [N("QuantizeLinear", ["p", "ys", "yz"], ["pq"]), N("DequantizeLinear", ["pq", "ys", "yz"], ["pd"]),
                  N("DequantizeLinear", ["w1", "w1s"], ["w1f"]), N("Conv", ["xf", "w1f"], ["r1"], name="branch"),
                  N("QuantizeLinear", ["r1", "ys", "yz"], ["r1q"]), N("DequantizeLinear", ["r1q", "ys", "yz"], ["r1d"]),
                  N("Add", ["pd", "r1d"], ["sum"], name="add"), N("QuantizeLinear", ["sum", "ys", "yz"], ["y"])]
    else:
        nodes.append(N("QuantizeLinear", ["p", "ys", "yz"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, [batch, c, hw, hw]),
              helper.make_tensor_value_info("s", TensorProto.UINT8 if gate_type == "u8" else TensorProto.INT8, [gate_batch, c, 1, 1])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.UINT8, [batch, cout, hw, hw])]
    if keep_gated:
        outputs.append(helper.make_tensor_value_info("gated", TensorProto.UINT8, [batch, c, hw, hw]))
    graph = helper.make_graph(nodes, "gate_fold", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(g_np)
    feeds = {"x": rng.integers(0, 256, (batch, c, hw, hw)).astype(np.uint8),
             "s": rng.integers(info.min, info.max + 1, (gate_batch, c, 1, 1)).astype(g_np)}
    return model, feeds


CASES = {
    "a gate per image": dict(),
    "one gate for every image": dict(gate_batch=1),
    "int8 gate": dict(gate_type="s8"),
    "with the residual Add": dict(residual=True),
    "channels not a multiple of 4, a large image": dict(c=37, hw=45),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_folded_gate_gives_the_bytes_of_the_pair_kept_apart(case, isa):
    model, feeds = _model(**CASES[case])
    apart_model, _ = _model(**CASES[case], keep_gated=True)
    got = run_folded_and_apart(model, apart_model, feeds, isa, lambda s: s.startswith("QMul 'gate' + NhwcQConv 'project'"))
    assert np.abs(got.astype(np.int32) - run_cpu(model, feeds)[0].astype(np.int32)).max() <= 2
