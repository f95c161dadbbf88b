"""EP option `profile`: OptimEP's per-step times inside its fused nodes. The file names every step of every
partition, counts the runs after `profile_warmup` (all of them, from concurrent threads too), is written
at Compile (a bad path fails session creation) and again when the session releases OptimEP. Off, nothing
changes. Also run under ASan/UBSan by `make test-asan`. No timing is asserted beyond "positive"."""

from __future__ import annotations

import gc
import json
import threading

import numpy as np
import pytest

from helpers import model_with_cpu_fallback
from optim.ep_plugin import EP_NAME, OptimEPError, placement, session

RNG = np.random.default_rng(13)
MODEL = model_with_cpu_fallback(RNG)


def _feeds(batch: int = 1) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((batch, 3, 32, 32)).astype(np.float32)}


def test_the_file_names_every_step_and_counts_the_runs_after_the_warmup(tmp_path):
    path = tmp_path / "steps.json"
    sess = session(MODEL, profile=str(path), profile_warmup=2)
    compiled = placement(sess).compiled
    at_compile = json.loads(path.read_text())
    assert [p["runs"] for p in at_compile["partitions"]] == [0, 0]
    for batch in (1, 1, 2, 2, 2):
        sess.run(None, _feeds(batch))
    del sess  # ORT releases OptimEP, which writes the final numbers
    gc.collect()
    doc = json.loads(path.read_text())
    assert doc["ep"] == EP_NAME and doc["warmup"] == 2 and doc["isa"]
    assert {p["partition"]: [s["label"] for s in p["steps"]] for p in doc["partitions"]} == compiled
    # Each partition: its input moved to channels last, the convolution (with the Relu it absorbed), and back.
    steps = [s for p in doc["partitions"] for s in p["steps"]]
    assert sorted(s["op"] for s in steps) == ["NhwcConv", "NhwcConv", "ToNchw", "ToNchw", "ToNhwc", "ToNhwc"]
    assert sorted(s["label"] for s in steps if s["op"] == "NhwcConv") == ["NhwcConv 'c1' (winograd) + Relu 'r1'", "NhwcConv 'c2' (winograd)"]
    for p in doc["partitions"]:
        assert p["runs"] == 3
        assert all(s["total_ns"] > 0 for s in p["steps"])
    shapes = {s["label"]: s["input_shape"] for s in steps if s["op"] == "NhwcConv"}
    assert shapes == {"NhwcConv 'c1' (winograd) + Relu 'r1'": [2, 32, 32, 3], "NhwcConv 'c2' (winograd)": [2, 32, 32, 8]}  # the last run's
    assert not (tmp_path / "steps.json.tmp").exists()


def test_runs_from_several_threads_are_all_counted(tmp_path):
    path = tmp_path / "steps.json"
    sess = session(MODEL, profile=str(path), threads=2)
    per_thread, threads = 15, 4
    feeds = _feeds()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(per_thread):
                sess.run(None, feeds)
        except BaseException as e:  # reported after the join
            errors.append(e)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors
    del sess  # ORT releases OptimEP, which writes the final numbers
    gc.collect()
    assert [p["runs"] for p in json.loads(path.read_text())["partitions"]] == [per_thread * threads] * 2


def test_profiling_off_changes_nothing(tmp_path):
    feeds = _feeds(3)
    plain = session(MODEL)
    profiled = session(MODEL, profile=str(tmp_path / "steps.json"))
    assert placement(plain).to_dict() == placement(profiled).to_dict()
    for _ in range(3):
        for got, ref in zip(profiled.run(None, feeds), plain.run(None, feeds)):
            assert np.array_equal(got, ref)
    del plain, profiled
    gc.collect()
    assert list(tmp_path.iterdir()) == [tmp_path / "steps.json"]  # only the profiled session wrote


def test_profile_none_means_off(tmp_path, monkeypatch):
    """A caller passing the option through (profile=args.profile) gets no profile, not a file named 'None'."""
    monkeypatch.chdir(tmp_path)
    sess = session(MODEL, profile=None)
    sess.run(None, _feeds())
    del sess
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_cannot_be_written_fails_session_creation_naming_the_option(tmp_path):
    with pytest.raises(Exception, match="cannot write profile '.*no-such-folder/steps.json'"):
        session(MODEL, profile=str(tmp_path / "no-such-folder" / "steps.json"))


def test_a_bad_warmup_count_is_refused():
    with pytest.raises(OptimEPError, match="profile_warmup='two' is not a non-negative integer"):
        session(MODEL, profile="unused.json", profile_warmup="two")
