"""int8 MobileNet blocks in one pass (rewrites/qdepthwise_block.cc, ops/qconv_block.h): a depthwise QDQ convolution
with the 1x1 one that alone reads it and the 1x1 expansion that alone feeds it, run in bands of rows whose expanded
and depthwise values never go to memory. The block must give the bytes of the same units run one by one (the same
graph with the values between them made graph outputs, which no fold touches), on every ISA (int16-pair and VNNI
kernels; channel counts that are and are not multiples of 4 and 16), and agree with ONNX Runtime's CPU EP up to
the requantization steps the two round differently."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
# The CPU EP rounds each unit's requantization in its own order: one step apart per unit, which the units after it
# can widen a little.
CPU_EP_MAX_STEPS = 8


def _model(*, cin=16, cexp=144, cout=24, hw=32, kernel=3, stride=1, expand=True, residual=False, relu=True, act=None,
           dw_kept=False, expose=False, batch=2, seed=0):
    """x (u8) -> [1x1 expansion] -> depthwise kernel x kernel / stride -> 1x1 projection [-> + x] -> y, each a QDQ
    convolution (int8 per-channel weights, uint8 activations), Relu after the first two when relu, and act
    (HardSwish, Sigmoid: a lookup table) after them too when given. dw_kept: the depthwise's output is a graph
    output too (as a squeeze-excite's second reader would make it); expose: every value between units is."""
    rng = np.random.default_rng(seed)
    inits = {"xs": np.float32(0.03), "xz": np.uint8(110)}
    nodes, outputs = [], []
    c_mid = cexp if expand else cin

    def unit(name, x, xs, xz, c_in, c_out, k, group, s, last):
        w = rng.integers(-127, 128, (c_out, c_in // group, k, k)).astype(np.int8)
        inits.update({f"{name}_w": w, f"{name}_ws": rng.uniform(0.002, 0.02, c_out).astype(np.float32),
                      f"{name}_wz": np.zeros(c_out, np.int8), f"{name}_b": rng.standard_normal(c_out).astype(np.float32),
                      f"{name}_s": np.float32(rng.uniform(0.04, 0.08)), f"{name}_z": np.uint8(rng.integers(0, 40) if relu and not last else 128)})
        nodes.extend([N("DequantizeLinear", [x, xs, xz], [f"{name}_xf"]),
                      N("DequantizeLinear", [f"{name}_w", f"{name}_ws", f"{name}_wz"], [f"{name}_wf"], axis=0),
                      N("Conv", [f"{name}_xf", f"{name}_wf", f"{name}_b"], [f"{name}_c"], kernel_shape=[k, k], group=group,
                        strides=[s, s], pads=[k // 2] * 4, name=name)])
        out = f"{name}_c"
        if relu and not last:
            nodes.append(N("Relu", [out], [f"{name}_r"]))
            out = f"{name}_r"
        nodes.append(N("QuantizeLinear", [out, f"{name}_s", f"{name}_z"], [f"{name}_q"]))
        q, s_name, z_name = f"{name}_q", f"{name}_s", f"{name}_z"
        if act and not last:  # a quantized element-wise region: a lookup table after the unit
            inits.update({f"{name}_as": np.float32(0.03), f"{name}_az": np.uint8(60)})
            nodes.extend([N("DequantizeLinear", [q, s_name, z_name], [f"{name}_af"]), N(act, [f"{name}_af"], [f"{name}_a"]),
                          N("QuantizeLinear", [f"{name}_a", f"{name}_as", f"{name}_az"], [f"{name}_aq"])])
            q, s_name, z_name = f"{name}_aq", f"{name}_as", f"{name}_az"
        return q, s_name, z_name

    out_hw = (hw + 2 * (kernel // 2) - kernel) // stride + 1
    cur = ("x", "xs", "xz")
    if expand:
        cur = unit("ex", *cur, cin, cexp, 1, 1, 1, False)
        if expose:
            outputs.append((cur[0], [batch, cexp, hw, hw]))
    cur = unit("dw", *cur, c_mid, c_mid, kernel, c_mid, stride, False)
    if expose or dw_kept:
        outputs.append((cur[0], [batch, c_mid, out_hw, out_hw]))
    cur = unit("pw", *cur, c_mid, cout, 1, 1, 1, True)
    y = cur[0]
    if residual:  # x + projection, both uint8, quantized again
        inits.update({"ys": np.float32(0.09), "yz": np.uint8(128)})
        nodes.extend([N("DequantizeLinear", list(cur), ["pw_df"]), N("DequantizeLinear", ["x", "xs", "xz"], ["x_df"]),
                      N("Add", ["pw_df", "x_df"], ["sum"], name="add"), N("QuantizeLinear", ["sum", "ys", "yz"], ["y"])])
        y = "y"
    outs = [helper.make_tensor_value_info(y, TensorProto.UINT8, [batch, cout, out_hw, out_hw])]
    outs += [helper.make_tensor_value_info(name, TensorProto.UINT8, shape) for name, shape in outputs]
    graph = helper.make_graph(nodes, "qconv_block", [helper.make_tensor_value_info("x", TensorProto.UINT8, [batch, cin, hw, hw])],
                              outs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": rng.integers(0, 256, (batch, cin, hw, hw)).astype(np.uint8)}


def _steps(sess) -> list[str]:
    return [s for ss in placement(sess).compiled.values() for s in ss]


# case: (model options, the units the block's step names). 144 expanded channels over 32 columns: several bands
# of rows per image (depthwise_bands.h), so rows shared between bands are kept and moved, not remade.
BLOCKS = {
    "expansion, depthwise, projection": (dict(), ["ex", "dw", "pw"]),
    "with the residual Add": (dict(cin=24, residual=True), ["ex", "dw", "pw"]),
    "stride 2": (dict(stride=2, hw=33), ["ex", "dw", "pw"]),
    "5x5 depthwise, stride 2": (dict(kernel=5, stride=2, hw=35), ["ex", "dw", "pw"]),
    "channels not multiples of 4": (dict(cin=6, cexp=150, cout=10), ["ex", "dw", "pw"]),
    "an expansion's last panel of 12 channels": (dict(cin=8, cexp=44, cout=16), ["ex", "dw", "pw"]),
    "no Relu": (dict(relu=False), ["ex", "dw", "pw"]),
    "no expansion": (dict(expand=False, cin=36), ["dw", "pw"]),
    "a small image: expansion apart": (dict(hw=14), ["dw", "pw"]),
    "depthwise read twice: takes only its expansion": (dict(dw_kept=True, stride=2, hw=33), ["ex", "dw"]),
    "a batch of five": (dict(batch=5, stride=2, hw=15, residual=False), ["ex", "dw", "pw"]),
    "HardSwish tables after the expansion and the depthwise": (dict(act="HardSwish", relu=False), ["ex", "dw", "pw"]),
    "Sigmoid tables, depthwise read twice": (dict(act="Sigmoid", dw_kept=True, stride=2, hw=33), ["ex", "dw"]),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(BLOCKS))
def test_a_block_gives_the_bytes_of_its_units_one_by_one(case, isa):
    options, units = BLOCKS[case]
    model, feeds = _model(**options)
    apart_model, _ = _model(**options, expose=True)
    block = session(model, fallback=False, isa=isa)
    apart = session(apart_model, fallback=False, isa=isa)
    # The block's step names its units in order (with the lookup tables folded into them, rewrites/lut_fold.cc).
    want = re.compile(" \\+ ".join(f"NhwcQConv '{u}'( \\+ QLut '[^']*')?" for u in units) + "$")
    assert any(want.match(s) for s in _steps(block)), _steps(block)
    assert not any(s.count("NhwcQConv") > 1 for s in _steps(apart)), _steps(apart)
    got = dict(zip([o.name for o in block.get_outputs()], block.run(None, feeds)))
    want_bytes = dict(zip([o.name for o in apart.get_outputs()], apart.run(None, feeds)))
    for name, value in got.items():
        np.testing.assert_array_equal(value, want_bytes[name], err_msg=f"{name}: {case} on {isa}")
    got = list(got.values())
    ref = run_cpu(model, feeds)[0]
    assert np.abs(got[0].astype(np.int32) - ref.astype(np.int32)).max() <= CPU_EP_MAX_STEPS


def test_a_small_image_says_why_its_expansion_stays_apart():
    sess = session(_model(hw=14)[0], fallback=False)
    assert any(r.startswith("qdepthwise_block: NhwcQConv 'ex': its depthwise's image is small")
               for r in placement(sess).rewrite_refusals), placement(sess).rewrite_refusals


def test_batch_one_shares_the_rows_of_one_image_over_the_threads():
    # One image: the bands are cut into runs for the threads, each run making its first band's shared rows again.
    model, feeds = _model(batch=1, hw=56, cin=24, cexp=72)
    apart_model, _ = _model(batch=1, hw=56, cin=24, cexp=72, expose=True)
    np.testing.assert_array_equal(session(model, fallback=False, threads=2).run(None, feeds)[0],
                                  session(apart_model, fallback=False, threads=2).run(None, feeds)[0])
