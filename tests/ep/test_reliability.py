"""OptimEP inside a host process: concurrent runs on one session, several sessions at once, inputs
larger than any seen before, odd inputs (empty, NaN/inf, wrong types), and thousands of sessions
created and destroyed without memory growth. Also run under ASan/UBSan by `make test-asan`."""

from __future__ import annotations

import os
import resource
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(2024)
SANITIZED = os.environ.get("OPTIM_EXPECT_SANITIZED") == "1"


def _cnn() -> bytes:
    """Conv-Relu-MaxPool-Conv-GlobalAveragePool-Flatten-Gemm with a dynamic batch."""
    return make_model(
        [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
         N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         N("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]), N("GlobalAveragePool", ["c2"], ["g"]),
         N("Flatten", ["g"], ["f"]), N("Gemm", ["f", "w3", "b3"], ["y"], transB=1)],
        {"x": (np.float32, ["batch", 3, 12, 12])}, ["y"],
        {"w1": rand(RNG, 8, 3, 3, 3), "b1": rand(RNG, 8), "w2": rand(RNG, 16, 8, 3, 3), "w3": rand(RNG, 5, 16),
         "b3": rand(RNG, 5)})


def _qdq_mlp() -> bytes:
    """x -> Q -> [DQ -> MatMul(DQ w) -> Relu -> Q] x2 -> DQ: two integer units between float ends."""
    nodes, inits = [N("QuantizeLinear", ["x", "s_in", "z"], ["q0"])], {"s_in": np.float32(0.05), "z": np.uint8(128)}
    k = 24
    for i in range(2):
        inits.update({f"w{i}": RNG.integers(-127, 128, (k, k)).astype(np.int8), f"ws{i}": np.float32(0.01),
                      f"s{i}": np.float32(0.04)})
        nodes += [N("DequantizeLinear", [f"q{i}", "s_in" if i == 0 else f"s{i - 1}", "z"], [f"d{i}"]),
                  N("DequantizeLinear", [f"w{i}", f"ws{i}"], [f"dw{i}"]),
                  N("MatMul", [f"d{i}", f"dw{i}"], [f"m{i}"]), N("Relu", [f"m{i}"], [f"r{i}"]),
                  N("QuantizeLinear", [f"r{i}", f"s{i}", "z"], [f"q{i + 1}"])]
    nodes.append(N("DequantizeLinear", ["q2", "s1", "z"], ["y"]))
    graph = helper.make_graph(nodes, "qmlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()


MODELS = {"cnn": (_cnn(), lambda rng, b: rng.standard_normal((b, 3, 12, 12)).astype(np.float32)),
          "qdq_mlp": (_qdq_mlp(), lambda rng, b: rng.standard_normal((b, 24)).astype(np.float32))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_eight_threads_on_one_session_give_the_single_threaded_results(name):
    model, make = MODELS[name]
    sess = session(model, fallback=False, threads=2)
    if name == "qdq_mlp":
        assert placement(sess).integer_units == 2
    rng = np.random.default_rng(5)
    inputs = [make(rng, int(rng.integers(1, 5))) for _ in range(16)]
    expected = [sess.run(None, {"x": x})[0] for x in inputs]
    runs_per_thread = 40 if SANITIZED else 250  # 8 x 250 = 2000 runs
    failures: list[str] = []

    def worker(t: int) -> None:
        for i in range(runs_per_thread):
            j = (t * 7 + i) % len(inputs)
            got = sess.run(None, {"x": inputs[j]})[0]
            if not np.array_equal(got, expected[j]):
                failures.append(f"thread {t} run {i} input {j}")
                return

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]


def test_several_sessions_of_different_models_at_once():
    """Each thread's results equal what a second, untouched session of the same model gives alone."""
    sessions = {name: session(model, fallback=False) for name, (model, _) in MODELS.items()}
    alone = {name: session(model, fallback=False) for name, (model, _) in MODELS.items()}
    runs = 10 if SANITIZED else 60
    inputs = {(name, seed): [MODELS[name][1](np.random.default_rng(seed * 100 + i), 3) for i in range(runs)]
              for seed, name in enumerate(list(MODELS) * 3)}
    expected = {key: [alone[key[0]].run(None, {"x": x})[0] for x in xs] for key, xs in inputs.items()}
    errors: list[str] = []

    def worker(name: str, seed: int) -> None:
        for i, x in enumerate(inputs[(name, seed)]):
            got = sessions[name].run(None, {"x": x})[0]
            if not np.array_equal(got, expected[(name, seed)][i]):
                errors.append(f"{name} seed {seed} run {i}: max diff {np.abs(got - expected[(name, seed)][i]).max()}")
                return

    threads = [threading.Thread(target=worker, args=(name, s)) for s, name in enumerate(list(MODELS) * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_inputs_larger_than_any_seen_before_are_re_planned():
    model, make = MODELS["cnn"]
    sess = session(model, fallback=False)
    rng = np.random.default_rng(9)
    for batch in [1, 64, 2, 128, 1, 33]:  # growing, shrinking, growing past every earlier plan
        x = make(rng, batch)
        assert_close(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0], what=f"batch {batch}")


def test_empty_batch_gives_an_empty_result():
    model, make = MODELS["cnn"]
    got = session(model, fallback=False).run(None, {"x": make(RNG, 0)})[0]
    assert got.shape == (0, 5)


def test_nan_and_inf_flow_like_on_the_cpu_ep():
    model = make_model([N("Relu", ["x"], ["r"]), N("Gemm", ["r", "w"], ["y"], transB=1), N("Sigmoid", ["y"], ["s"])],
                       {"x": (np.float32, [4, 6])}, ["s"], {"w": rand(RNG, 3, 6)})
    x = rand(RNG, 4, 6)
    x[0, 0], x[1, 2], x[2, 5] = np.nan, np.inf, -np.inf
    assert_close(session(model, fallback=False).run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])


@pytest.mark.parametrize("feed, says", [
    ({"x": np.zeros((2, 3, 12, 12), np.float64)}, "data type"),
    ({"x": np.zeros((2, 3, 12), np.float32)}, "rank"),
    ({"x": np.zeros((2, 4, 12, 12), np.float32)}, "dimensions"),
    ({"images": np.zeros((2, 3, 12, 12), np.float32)}, "images"),
])
def test_wrong_inputs_raise_without_harm_and_the_session_keeps_working(feed, says):
    model, make = MODELS["cnn"]
    sess = session(model, fallback=False)
    with pytest.raises(Exception) as e:
        sess.run(None, feed)
    assert says in str(e.value).lower() or says in str(e.value)
    x = make(RNG, 2)
    assert_close(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


@pytest.mark.skipif(SANITIZED, reason="ASan's quarantine holds freed memory on purpose; LeakSanitizer covers leaks there")
def test_creating_and_destroying_sessions_keeps_memory_flat():
    model, make = MODELS["qdq_mlp"]
    x = make(RNG, 4)

    def cycle(n: int) -> None:
        for _ in range(n):
            s = session(model, fallback=False)
            s.run(None, {"x": x})
            del s

    cycle(100)  # allocator pools and caches reach their steady size
    before = _rss_mb()
    cycle(1000)
    growth = _rss_mb() - before
    print(f"resident memory: {before:.1f} MB, then {growth:+.1f} MB after 1000 more sessions")
    assert growth < 20, f"resident memory grew {growth:.1f} MB over 1000 sessions"


@pytest.mark.skipif(SANITIZED, reason="ASan's quarantine holds freed memory on purpose")
def test_a_long_running_session_keeps_memory_flat():
    model, make = MODELS["cnn"]
    sess = session(model, fallback=False)
    rng = np.random.default_rng(1)
    for _ in range(200):
        sess.run(None, {"x": make(rng, int(rng.integers(1, 9)))})
    before = _rss_mb()
    for _ in range(3000):
        sess.run(None, {"x": make(rng, int(rng.integers(1, 9)))})
    growth = _rss_mb() - before
    print(f"resident memory: {before:.1f} MB, then {growth:+.1f} MB after 3000 runs")
    assert growth < 10, f"resident memory grew {growth:.1f} MB over 3000 runs"


def test_a_huge_intermediate_tensor_is_an_error_not_an_allocation():
    """Fuzzing found a model whose intermediate needed 34 GB: now a clear error, nothing allocated."""
    model = make_model([N("Conv", ["x", "w"], ["c"], pads=[40000, 40000, 40000, 40000], name="wide_conv"),
                        N("GlobalAveragePool", ["c"], ["y"])],
                       {"x": (np.float32, [1, 1, 4, 4])}, ["y"], {"w": rand(RNG, 8, 1, 3, 3)})
    sess = session(model, fallback=False)
    with pytest.raises(Exception, match="more than the limit of"):
        sess.run(None, {"x": rand(RNG, 1, 1, 4, 4)})
