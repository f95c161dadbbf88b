"""`optim bench` through click's runner: the report's fields, the JSON schema, the plot, argument
errors and the noise warning (simulated with a fake clock). No timing is asserted."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import helper

import peer_fakes
from helpers import make_model, rand
from optim.cli import main

N = helper.make_node
RNG = np.random.default_rng(11)
RUNTIMES_TABLE_HEADER = ["runtime", "min", "mean", "median", "p90", "p95", "p99", "max", "inf/s", "cv"]


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "mlp.onnx"
    path.write_bytes(make_model(
        [N("Gemm", ["x", "w1", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]), N("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
        {"x": (np.float32, ["batch", 16])}, ["y"],
        {"w1": rand(RNG, 32, 16), "b1": rand(RNG, 32), "w2": rand(RNG, 4, 32), "b2": rand(RNG, 4)}))
    return path


@pytest.fixture(scope="module")
def fixed_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "fixed.onnx"
    path.write_bytes(make_model([N("Relu", ["x"], ["y"])], {"x": (np.float32, [2, 8])}, ["y"]))
    return path


def invoke(*args):
    return CliRunner().invoke(main, ["bench", *[str(a) for a in args]])


def test_summary_has_every_statistic_the_ratio_and_the_placement(mlp_file):
    r = invoke(mlp_file, "--input", "x:4x16", "--runs", "5", "--warmup", "1", "--vs", "cpu", "--threads", "1")
    assert r.exit_code == 0, r.output
    out = r.output
    assert "placement: 3/3 nodes on OptimEP" in out
    assert "session creation: OptimEP" in out and "CPU EP" in out
    assert "threads: 1" in out and "peak resident memory:" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("runtime"))
    assert header.split()[:10] == RUNTIMES_TABLE_HEADER
    assert any(line.strip().startswith("OptimEP ") for line in out.splitlines())
    assert "ratio CPU EP / OptimEP median =" in out and ("x faster" in out or "x slower" in out)


def test_json_report_schema(mlp_file, tmp_path):
    out = tmp_path / "report.json"
    r = invoke(mlp_file, "--batch", "1,3", "--runs", "4", "--warmup", "0", "--vs", "cpu", "--vs", "cpu-noopt",
               "--concurrency", "2", "--json", out)
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert set(d) >= {"model", "options", "machine", "session_create_ms", "placement", "results", "concurrency",
                      "peak_rss_mb", "ratio", "noisy"}
    assert set(d["machine"]) >= {"cpu", "cores", "isa_flags", "onnxruntime", "numpy", "python", "optim"}
    assert d["options"]["vs"] == ["cpu", "cpu-noopt"] and d["options"]["batches"] == [1, 3]
    assert [res["batch"] for res in d["results"]] == [1, 3]
    assert d["results"][1]["shapes"] == {"x": [3, 16]}
    for res in d["results"]:
        stats = res["optim"]
        assert set(stats) == {"runs", "min_ms", "mean_ms", "median_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "cv", "throughput"}
        assert stats["runs"] == 4
        assert stats["min_ms"] <= stats["median_ms"] <= stats["p90_ms"] <= stats["p95_ms"] <= stats["p99_ms"] <= stats["max_ms"]
        assert set(res["others"]) == set(res["ratio"]) == {"cpu", "cpu-noopt"}
        assert res["ratio"]["cpu"] == pytest.approx(res["others"]["cpu"]["median_ms"] / stats["median_ms"])
    assert d["ratio"] == d["results"][0]["ratio"]
    assert d["concurrency"]["threads"] == 2 and d["concurrency"]["requests"] == 4
    assert d["concurrency"]["latency"]["runs"] == 4
    assert d["placement"]["optim_nodes"] == 3


def test_duration_and_warmup_seconds(mlp_file, tmp_path):
    out = tmp_path / "r.json"
    r = invoke(mlp_file, "--input", "x:2x16", "--warmup", "0", "--warmup-seconds", "0.05", "--duration", "0.2", "--json", out)
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["options"]["duration_s"] == 0.2 and d["options"]["warmup_s"] == 0.05
    assert d["results"][0]["optim"]["runs"] >= 2


def test_sweep_prints_a_row_per_batch(mlp_file):
    r = invoke(mlp_file, "--batch", "1,2,4", "--runs", "3", "--warmup", "0", "--vs", "cpu")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    i = lines.index("sweep:")
    assert lines[i + 1].split()[:1] == ["batch"]
    assert [line.split()[0] for line in lines[i + 2:i + 5]] == ["1", "2", "4"]


def test_plot_is_written_as_a_png(mlp_file, tmp_path):
    png = tmp_path / "lat.png"
    r = invoke(mlp_file, "--batch", "1,2", "--runs", "5", "--warmup", "0", "--vs", "cpu", "--plot", png)
    assert r.exit_code == 0, r.output
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_noise_warning_on_a_simulated_noisy_machine(mlp_file, monkeypatch):
    import optim.ep_plugin.timing as timing

    # Each run "takes" alternately 1 ms and 3 ms: a cv of 50%.
    ticks = itertools.count()
    durations = itertools.cycle([0.001, 0.003])
    clock = {"t": 0.0}

    def fake_timer():
        if next(ticks) % 2:  # every second call ends a run
            clock["t"] += next(durations)
        return clock["t"]

    monkeypatch.setattr(timing, "_timer", fake_timer)
    r = invoke(mlp_file, "--input", "x:1x16", "--runs", "10", "--warmup", "0")
    assert r.exit_code == 0, r.output
    assert "WARNING: OptimEP's latencies vary by 50%" in r.output and "too noisy" in r.output


def test_quiet_machine_gives_no_warning(mlp_file, monkeypatch):
    import optim.ep_plugin.timing as timing

    clock = {"t": 0.0}

    def steady():
        clock["t"] += 0.0005
        return clock["t"]

    monkeypatch.setattr(timing, "_timer", steady)
    r = invoke(mlp_file, "--input", "x:1x16", "--runs", "10", "--warmup", "0")
    assert r.exit_code == 0 and "WARNING" not in r.output


def test_openvino_without_the_package_is_skipped_with_a_note(mlp_file, monkeypatch):
    import optim.ep_plugin.tools.bench_peers as peers

    monkeypatch.setattr(peers, "openvino_available", lambda: False)
    r = invoke(mlp_file, "--input", "x:1x16", "--runs", "3", "--vs", "openvino")
    assert r.exit_code == 0, r.output
    assert "note: --vs openvino skipped: the openvino package is not installed" in r.output


def test_openvino_runs_in_f32_and_the_report_says_so(mlp_file, tmp_path):
    pytest.importorskip("openvino")
    out = tmp_path / "r.json"
    r = invoke(mlp_file, "--input", "x:2x16", "--runs", "3", "--warmup", "1", "--vs", "openvino", "--json", out)
    assert r.exit_code == 0, r.output
    assert any(line.strip().startswith("OpenVINO (f32) ") for line in r.output.splitlines())
    assert "OpenVINO (f32): OpenVINO " in r.output and "inference precision f32" in r.output
    assert "ratio OpenVINO (f32) / OptimEP median" in r.output and "note:" not in r.output
    d = json.loads(out.read_text())
    assert set(d["results"][0]["others"]) == {"openvino"} and d["peers"]["openvino"].endswith("inference precision f32")


@pytest.fixture
def fake_openvino(monkeypatch):
    """fake_openvino(cls): OpenVINO's runner replaced by one of peer_fakes' (the peer's child process gets it)."""
    import optim.ep_plugin.tools.bench_peers as peers

    monkeypatch.setattr(peers, "openvino_available", lambda: True)
    return lambda cls: monkeypatch.setattr(peers, "OpenVinoRunner", cls)


def test_a_peer_that_cannot_load_the_model_is_one_line_and_the_others_still_run(mlp_file, fake_openvino):
    fake_openvino(peer_fakes.FailsToLoad)
    r = invoke(mlp_file, "--input", "x:1x16", "--runs", "3", "--vs", "openvino", "--vs", "cpu")
    assert r.exit_code == 0, r.output
    assert "note: --vs openvino could not load the model: unsupported op: FancyOp" in r.output.splitlines()
    assert "ratio CPU EP / OptimEP median" in r.output and "OpenVINO (f32) " not in r.output


def test_a_peer_that_fails_to_run_is_dropped_and_the_sweep_goes_on(mlp_file, fake_openvino, tmp_path):
    fake_openvino(peer_fakes.FailsOnItsFourthRun)  # warm-up 1, then fails on its third timed run of batch 1
    out = tmp_path / "r.json"
    r = invoke(mlp_file, "--batch", "1,2", "--runs", "3", "--warmup", "1", "--vs", "openvino", "--vs", "cpu", "--json", out)
    assert r.exit_code == 0, r.output
    assert "note: --vs openvino failed to run the model: inference failed: out of fake memory (batch 1)" in r.output
    d = json.loads(out.read_text())
    assert [set(res["others"]) for res in d["results"]] == [{"cpu"}, {"cpu"}]
    assert [res["optim"]["runs"] for res in d["results"]] == [3, 3]
    lines = r.output.splitlines()
    assert [line.split()[0] for line in lines[lines.index("sweep:") + 2:]][:2] == ["1", "2"]


@pytest.mark.parametrize("fake, says", [(peer_fakes.CrashesLoading, "--vs openvino crashed (signal SIGSEGV) loading the model"),
                                        (peer_fakes.CrashesOnItsSecondRun, "--vs openvino crashed (signal SIGSEGV) on this model")])
def test_a_peer_that_crashes_is_one_line_and_the_benchmark_completes(mlp_file, fake_openvino, fake, says):
    """OpenVINO segfaults compiling some int8 models: the peer runs in a child process, so its crash is a note."""
    fake_openvino(fake)
    r = invoke(mlp_file, "--input", "x:1x16", "--runs", "3", "--warmup", "1", "--vs", "openvino", "--vs", "cpu")
    assert r.exit_code == 0, r.output
    assert any(line.startswith("note: " + says) for line in r.output.splitlines()), r.output
    assert "ratio CPU EP / OptimEP median" in r.output and "Traceback" not in r.output


def test_profile_after_the_benchmark(mlp_file, tmp_path):
    out = tmp_path / "r.json"
    r = invoke(mlp_file, "--batch", "2", "--runs", "3", "--warmup", "1", "--profile", "--json", out)
    assert r.exit_code == 0, r.output
    assert "profile of " in r.output and "by op type:" in r.output
    d = json.loads(out.read_text())
    assert d["profile"]["inputs"] == {"x": [2, 16]} and d["profile"]["runs"] == 3
    assert {row["nodes"] for row in d["profile"]["rows"] if row["op"] != "(fused node)"} == {
        label for steps in d["placement"]["compiled"].values() for label in steps}


@pytest.mark.parametrize("args, says", [
    (["--batch", "1,x"], "bad --batch '1,x'"),
    (["--batch", "0"], "sizes must be >= 1"),
    (["--runs", "0"], "Invalid value for '--runs'"),
    (["--vs", "tensorrt"], "Invalid value for '--vs'"),
    (["--input", "y:1x16"], "no model input named 'y'"),
    ([], "input 'x' has dynamic dims"),
])
def test_argument_errors_are_one_sentence(mlp_file, args, says):
    r = invoke(mlp_file, *args)
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output


def test_batch_on_a_fixed_batch_model_is_refused(fixed_file):
    r = invoke(fixed_file, "--batch", "4")
    assert r.exit_code == 2
    assert "fixed batch dimension 2; --batch 4 cannot change it" in r.output


def test_missing_and_non_onnx_files(tmp_path):
    assert invoke(tmp_path / "none.onnx").exit_code == 2
    bad = tmp_path / "bad.onnx"
    bad.write_text("nope")
    r = invoke(bad)
    assert r.exit_code == 2 and "is not an ONNX model" in r.output


def test_a_session_that_times_itself_is_counted_by_its_own_clock():
    """A peer in a child process reports how long its run took there (`last_seconds`); the pipe's round trip is
    not the runtime's time, so time_alternating counts the former."""
    from optim.ep_plugin.timing import time_alternating

    class SelfTimed:
        last_seconds = None

        def run(self, _outputs, _feeds):
            self.last_seconds = 0.25

    class Plain:
        def run(self, _outputs, _feeds):
            pass

    times = time_alternating({"child": SelfTimed(), "here": Plain()}, {}, warmup=1, runs=3, duration=None)
    assert times["child"] == [0.25] * 3 and all(t < 0.25 for t in times["here"])
