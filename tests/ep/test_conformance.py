"""ONNX's own node conformance cases for every op OptimEP claims, run on OptimEP with CPU fallback
disabled and compared with the expected outputs shipped in the case (the case's own rtol/atol).

A case is skipped, with the reason, when OptimEP refuses one of its nodes (for example a float64
variant: OptimEP runs float32) or when ONNX Runtime 1.31 itself cannot load the case."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from helpers import ISAS
from optim.ep_plugin import UnclaimedNodesError, session
from optim.ep_plugin.tools.doctor import diagnose

MAX_IR_VERSION = 10  # what ONNX Runtime 1.31 reads; the cases are written by a newer onnx
# Newer onnx writes some cases at opsets ONNX Runtime 1.31 does not load yet (e.g. 28 for
# QuantizeLinear). Such a case is re-declared at the newest of these opsets that the ONNX checker
# accepts for its nodes, i.e. where the op's schema (attributes, types) still admits the case.
FALLBACK_OPSETS = (23, 22, 21, 20, 19)


def _claimed_ops() -> set[str]:
    report = diagnose()
    assert report["ok"], report["error"]
    return set(report["ops"])


# Contrib ops OptimEP claims ("domain::op"): ONNX ships no cases for them; each is tested against ONNX Runtime's CPU
# EP, which runs the same op, in the file named here.
CONTRIB_TESTS = {"com.microsoft::MatMulNBits": "tests/ep/test_matmul_nbits.py"}
ALL_CLAIMED = _claimed_ops()
CLAIMED = {op for op in ALL_CLAIMED if "::" not in op}


def _cases():
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators warn about their own overflow demos
        all_cases = node_cases.collect_testcases()
    out = {}
    for c in all_cases:
        ops = {n.op_type for n in c.model.graph.node}
        if ops and ops <= CLAIMED and all(n.domain in ("", "ai.onnx") for n in c.model.graph.node):
            out[c.name] = c
    return out


CASES = _cases()

# Cases where ONNX Runtime's CPU EP, the reference OptimEP follows (models are validated on it), itself
# disagrees with the case's expected output; each with the reason.
FOLLOWS_ORT = {
    "test_resize_downsample_scales_linear_align_corners":
        "ONNX's reference divides by in * scale (2.4, unrounded) where ONNX Runtime divides by the output size (2)",
}


def _model_bytes(case, opset: int | None = None) -> bytes:
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    if opset is not None:
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                imp.version = opset
        onnx.checker.check_model(model, full_check=True)  # raises when the schema at `opset` rejects it
    return model.SerializeToString()


def _loadable_bytes(case) -> bytes:
    """The case as ONNX Runtime 1.31 can load it (see FALLBACK_OPSETS), or the original bytes."""
    original = _model_bytes(case)
    try:
        ort.InferenceSession(original, providers=["CPUExecutionProvider"])
        return original
    except Exception as e:
        if "opset" not in str(e).lower():
            return original
    for opset in FALLBACK_OPSETS:
        try:
            return _model_bytes(case, opset)
        except Exception:
            continue
    return original


def _open(case, isa):
    try:
        return session(_loadable_bytes(case), fallback=False, isa=isa)
    except UnclaimedNodesError as e:
        pytest.skip(f"OptimEP refuses it: {e}")
    except Exception as e:  # ORT itself cannot load it (opset or type it does not know)
        pytest.skip(f"ONNX Runtime cannot load this case: {str(e).splitlines()[0][:200]}")


def _array(v) -> np.ndarray:
    """Case data: numpy arrays, numpy scalars, or (e.g. the Cast cases) TensorProtos."""
    return onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case(name, isa):
    if name in FOLLOWS_ORT:
        pytest.skip(FOLLOWS_ORT[name])
    case = CASES[name]
    sess = _open(case, isa)
    input_names = [i.name for i in sess.get_inputs()]
    for inputs, expected in case.data_sets:
        feeds = {k: _array(v) for k, v in zip(input_names, inputs)}
        got = sess.run(None, feeds)
        for g, e in zip(got, expected):
            e = _array(e)
            assert g.shape == e.shape, f"{name}: shape {g.shape} != expected {e.shape}"
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, err_msg=name)


def test_every_claimed_contrib_op_has_its_differential_tests():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    contrib = sorted(op for op in ALL_CLAIMED if "::" in op)
    assert contrib, "the report lists no contrib op: the filter above would hide a change in its format"
    for op in contrib:
        assert op in CONTRIB_TESTS, f"{op} is claimed but no differential test file is named for it"
        assert (root / CONTRIB_TESTS[op]).is_file(), CONTRIB_TESTS[op]


def test_every_claimed_op_has_a_conformance_case_it_runs():
    """Guards against skipping our way to green: each claimed op is exercised by >= 1 case."""
    ran: dict[str, int] = {op: 0 for op in CLAIMED}
    for name, case in CASES.items():
        try:
            session(_loadable_bytes(case), fallback=False)
        except Exception:
            continue
        for n in case.model.graph.node:
            ran[n.op_type] += 1
    missing = sorted(op for op, n in ran.items() if n == 0)
    assert not missing, f"claimed ops with no conformance case OptimEP runs: {missing}"
