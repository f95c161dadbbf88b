"""`optim profile` and optim.ep_plugin.tools.profile: OptimEP's step times merged with ONNX Runtime's profiler.
The rows name every OptimEP step and every node left to the CPU EP; times are positive and the shares add
up to one. The merge itself is checked on a hand-written trace. No timing threshold is asserted."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from helpers import model_with_cpu_fallback
from optim.cli import main
from optim.ep_plugin import EP_NAME, placement, session
from optim.ep_plugin.tools.profile import PARTITION_OP, _merge, _ort_nodes, profile


@pytest.fixture(scope="module")
def fallback_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "fallback.onnx"
    path.write_bytes(model_with_cpu_fallback(np.random.default_rng(3)))
    return path


def assert_complete(prof, model: str, shapes: dict) -> None:
    """Every OptimEP step and every CPU EP node of `model` has its row; times positive; shares add up."""
    p = placement(session(model))
    steps = {(r.partition, r.nodes) for r in prof.rows if r.where == EP_NAME and r.op != PARTITION_OP}
    assert steps == {(part, label) for part, labels in p.compiled.items() for label in labels}
    cpu = sorted(r.nodes for r in prof.rows if r.where == "CPU EP")
    assert cpu == sorted(f"{n.op} '{n.node}'" for n in p.fallback)
    assert all(r.mean_ms > 0 for r in prof.rows), [(r.nodes, r.mean_ms) for r in prof.rows]
    assert sum(r.share for r in prof.rows) == pytest.approx(1.0)
    assert sum(s["share"] for s in prof.by_op()) == pytest.approx(1.0)
    assert [r.mean_ms for r in prof.rows] == sorted((r.mean_ms for r in prof.rows), reverse=True)
    assert prof.inputs == shapes and prof.run_mean_ms > 0 and prof.run_cv >= 0 and not prof.notes


def test_rows_name_every_step_and_every_cpu_ep_node(fallback_file):
    prof = profile(str(fallback_file), batch=2, runs=5, warmup=2)
    assert_complete(prof, str(fallback_file), {"x": [2, 3, 32, 32]})
    by_label = {r.nodes: r for r in prof.rows}
    # Convolutions run channels last: their inputs are NHWC.
    assert by_label["NhwcConv 'c1' (winograd) + Relu 'r1'"].input_shapes == [[2, 32, 32, 3]]
    assert by_label["NhwcConv 'c2' (winograd)"].input_shapes == [[2, 32, 32, 8]]
    assert by_label["Hardmax 'hm'"].op == "Hardmax" and by_label["Hardmax 'hm'"].input_shapes[0] == [2, 8, 32, 32]
    assert {(s["where"], s["op"]) for s in prof.by_op()} >= {(EP_NAME, "NhwcConv"), ("CPU EP", "Hardmax"),
                                                           ("CPU EP", "Shrink")}


@pytest.mark.slow
def test_the_zoo_cnn_in_fp32_and_int8(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from optim.exporter import export
    from optim.models import example_inputs

    fp32 = str(export("cnn", tmp_path / "cnn.onnx").path)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([example_inputs("cnn", seed=s) for s in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    int8 = str(tmp_path / "cnn.int8.onnx")
    quantize_static(fp32, int8, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8)
    for model in (fp32, int8):
        prof = profile(model, batch=1, runs=3, warmup=1)
        assert_complete(prof, model, {"x": [1, 3, 32, 32]})
    assert any(r.op == "NhwcQConv" and r.nodes.startswith("NhwcQConv '") for r in prof.rows)


def test_the_merge_skips_the_warmup_and_adds_each_fused_node_time_outside_its_steps():
    def node(name, op, provider, ts, dur):
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur,
                "args": {"op_name": op, "provider": provider, "input_type_shape": [{"float": [1, 4]}]}}

    trace = []
    for i, scale in enumerate([100, 1, 1]):  # a slow warm-up run, then two runs
        t = 1000 * i
        trace += [{"cat": "Session", "name": "model_run", "ts": t, "dur": 40 * scale},
                  node("OptimEP_p0", "OptimEP_p", EP_NAME, t + 1, 30 * scale),
                  node("up", "Resize", "CPUExecutionProvider", t + 31, 6 * scale)]
    nodes, run_ms = _ort_nodes(trace, warmup=1)
    assert run_ms == [0.04, 0.04]
    steps = {"partitions": [{"partition": "OptimEP_p0", "runs": 2, "steps": [
        {"label": "Conv 'c' + Relu 'r'", "op": "Conv", "total_ns": 40_000, "input_shape": [1, 4]},
        {"label": "QGemm 'g'", "op": "QGemm", "total_ns": 10_000, "input_shape": None}]}]}
    rows, notes = _merge(steps, nodes, runs=2)
    got = [(r.where, r.op, r.nodes, round(r.mean_ms, 6), round(r.share, 6)) for r in rows]
    assert got == [(EP_NAME, "Conv", "Conv 'c' + Relu 'r'", 0.02, 0.555556),
                   ("CPU EP", "Resize", "Resize 'up'", 0.006, 0.166667),
                   (EP_NAME, "QGemm", "QGemm 'g'", 0.005, 0.138889),
                   (EP_NAME, PARTITION_OP, "OptimEP_p0 outside its steps", 0.005, 0.138889)]
    assert not notes
    _, notes = _merge({"partitions": [dict(steps["partitions"][0], runs=1)]}, nodes, runs=2)
    assert notes == [f"{EP_NAME} counted 1 run(s) of OptimEP_p0, not 2 (inside a loop or branch?)"]


def invoke(*args):
    return CliRunner().invoke(main, ["profile", *[str(a) for a in args]])


def test_cli_table_and_summary(fallback_file):
    r = invoke(fallback_file, "--input", "x:1x3x32x32", "--runs", "3", "--warmup", "1", "--threads", "1")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["ms/run", "share"])
    assert lines[header].split() == ["ms/run", "share", "where", "op", "input", "shapes", "node(s)"]
    body = lines[header + 1:lines.index("by op type:")]
    for label in ("NhwcConv 'c1' (winograd) + Relu 'r1'", "NhwcConv 'c2' (winograd)", "Hardmax 'hm'", "Shrink 'sh'"):
        assert sum(line.endswith(f"  {label}") for line in body) == 1, (label, body)
    assert any(line.startswith(f"  {EP_NAME}: NhwcConv ") for line in lines)
    assert any(line.startswith("  CPU EP: ") and "Hardmax" in line and "Shrink" in line for line in lines)


def test_cli_json_and_top(fallback_file):
    r = invoke(fallback_file, "--batch", "1", "--runs", "2", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert set(d) >= {"model", "inputs", "runs", "warmup", "isa", "run_mean_ms", "run_cv", "noisy", "total_ms", "rows",
                      "by_op", "notes"}
    assert set(d["rows"][0]) == {"where", "op", "nodes", "input_shapes", "mean_ms", "share", "partition", "kernel"}
    assert len(d["rows"]) >= 4 and d["runs"] == 2
    r = invoke(fallback_file, "--batch", "1", "--runs", "2", "--top", "1")
    assert r.exit_code == 0 and "more row(s)" in r.output and "(--top 0 shows all)" in r.output


def test_cli_errors_are_one_sentence(fallback_file):
    r = invoke(fallback_file)
    assert r.exit_code == 2 and "input 'x' has dynamic dims" in r.output and "Traceback" not in r.output


def test_noisy_runs_give_a_warning():
    from optim.ep_plugin.tools.profile import Profile, ProfileRow
    from optim.ep_plugin.tools.profile_report import print_profile

    rows = [ProfileRow(EP_NAME, "Conv", "Conv 'c'", [[1, 4]], 0.2, 1.0, "p")]
    lines: list[str] = []
    for cv in (0.5, 0.01):
        print_profile(Profile("m.onnx", {"x": [1, 4]}, 10, 1, None, "avx2", 0.25, cv, rows), lines.append)
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1 and "the runs vary by 50%" in warnings[0]


@pytest.mark.parametrize("w_bits, kernel", [(8, "conv_gemm_s16_avx2_6x16"), (7, "conv_gemm_u8s8_avx2_5x16")])
def test_integer_steps_name_the_kernel_they_chose(tmp_path, w_bits, kernel):
    """An int8 convolution (stride 2: direct) names its GEMM kernel (AVX2: int16 pairs for 8-bit weights, u8 x s8
    pairs for 7-bit ones) in the JSON rows and in a kernel column of the table; steps that choose none show '-'."""
    from qdq_models import qconv_unit_model

    c = dict(spatial=2, n=1, groups=1, cin_g=8, cout_g=16, kernel=[3, 3], strides=[2, 2], dilations=[1, 1],
             pads=[1, 1, 1, 1], size=[6, 6], x_type="u8", y_type="u8", w_zero=0, w_bits=w_bits, relu=True, seed=2)
    path = tmp_path / "qconv.onnx"
    path.write_bytes(qconv_unit_model(c)[0])
    r = invoke(path, "--runs", "2", "--isa", "avx2", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert [row["kernel"] for row in rows if row["op"] == "NhwcQConv"] == [kernel]
    assert {row["kernel"] for row in rows if row["op"] != "NhwcQConv"} == {""}
    r = invoke(path, "--runs", "2", "--isa", "avx2")
    header = next(line for line in r.output.splitlines() if "ms/run" in line)
    assert "kernel" in header and kernel in r.output
