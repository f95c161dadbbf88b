"""`optim serve`'s HTTP server against Triton's own HTTP client (tritonclient, not ours): server and model
metadata, inference with JSON and binary tensors equal to the model run directly, many concurrent clients with
batching on, every kind of bad request answered 4xx while the server keeps serving, 503/504 when the queue is full
or a request times out, a graceful shutdown that answers the request in flight, and the /metrics text."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from helpers import assert_close
from serve_helpers import MAX_DELAY_MS, direct, running, write_repository

CLIENTS = 16  # concurrent clients in the concurrency test
REQUESTS_EACH = 4


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return write_repository(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def server(repo):
    with running([repo], max_batch=8, max_delay_ms=MAX_DELAY_MS) as server:
        yield server


@pytest.fixture
def client(server):
    client = triton.InferenceServerClient(server.url)
    yield client
    client.close()


def infer_input(name: str, array: np.ndarray, binary: bool = True) -> triton.InferInput:
    tensor = triton.InferInput(name, list(array.shape), triton.np_to_triton_dtype(array.dtype))
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def post(server, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    """A raw POST (for bodies tritonclient would never send): status and JSON answer."""
    request = urllib.request.Request(f"http://{server.url}{path}", data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def metrics(server) -> str:
    with urllib.request.urlopen(f"http://{server.url}/metrics") as response:
        return response.read().decode()


def sample(text: str, name: str, **labels) -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and ",".join(sorted(match.group(1).split(","))) == wanted:
            return float(match.group(2))
    return 0.0


def test_server_and_model_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "optim" and "binary_tensor_data" in meta["extensions"]
    assert client.is_model_ready("mlp") and not client.is_model_ready("nope")
    assert client.get_model_metadata("mlp") == {
        "name": "mlp", "versions": ["1"], "platform": "onnxruntime_onnx",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 32]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 10]}]}
    tokens = client.get_model_metadata("tokens", model_version="1")
    assert [(t["name"], t["datatype"], t["shape"]) for t in tokens["inputs"]] == [
        ("ids", "INT64", [-1, -1]), ("mask", "FP32", [-1, -1])]
    assert client.get_model_metadata("fixed")["inputs"][0]["shape"] == [2, 4]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_infer_equals_the_model_run_directly(client, repo, binary):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 32)).astype(np.float32)
    result = client.infer("mlp", [infer_input("x", x, binary)],
                          outputs=[triton.InferRequestedOutput("y", binary_data=binary)], request_id="r7")
    assert result.get_response()["id"] == "r7"
    assert_close(result.as_numpy("y"), direct(repo / "mlp.onnx", {"x": x})["y"], what="mlp y")
    ids, mask = rng.integers(0, 100, (2, 5)), (rng.random((2, 5)) > 0.3).astype(np.float32)
    result = client.infer("tokens", [infer_input("ids", ids, binary), infer_input("mask", mask, binary)])
    expected = direct(repo / "tokens.onnx", {"ids": ids, "mask": mask})
    for name in ("y", "s"):
        assert_close(result.as_numpy(name), expected[name], what=f"tokens {name}")
    x = rng.standard_normal((2, 4)).astype(np.float32)
    result = client.infer("fixed", [infer_input("x", x, binary)])
    np.testing.assert_array_equal(result.as_numpy("y"), np.maximum(x, 0))


def test_many_concurrent_clients_get_their_own_answers_with_batching_on(server, repo):
    before = metrics(server)
    barrier = threading.Barrier(CLIENTS)

    def one_client(index: int):
        rng = np.random.default_rng(100 + index)
        client = triton.InferenceServerClient(server.url)
        barrier.wait()  # all at once, so that requests meet in the queue
        answers = []
        for k in range(REQUESTS_EACH):
            if (index + k) % 3:
                x = rng.standard_normal((1 + (index + k) % 3, 32)).astype(np.float32)
                got = client.infer("mlp", [infer_input("x", x)]).as_numpy("y")
                answers.append(("mlp", {"x": x}, {"y": got}))
            else:  # two sequence lengths: they must not share a batch
                seq = 6 if index % 2 else 9
                feeds = {"ids": rng.integers(0, 50, (1, seq)), "mask": np.ones((1, seq), np.float32)}
                result = client.infer("tokens", [infer_input(k, v) for k, v in feeds.items()])
                answers.append(("tokens", feeds, {"y": result.as_numpy("y"), "s": result.as_numpy("s")}))
        client.close()
        return answers

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for client_answers in pool.map(one_client, range(CLIENTS)) for a in client_answers]
    for model, feeds, got in answers:
        expected = direct(repo / f"{model}.onnx", feeds)
        for name, value in got.items():
            assert_close(value, expected[name], what=f"{model} {name}")
    after = metrics(server)
    requests = sum(sample(after, "optim_inference_requests_total", model=m) - sample(before, "optim_inference_requests_total", model=m)
                   for m in ("mlp", "tokens"))
    batches = sum(sample(after, "optim_batch_requests_count", model=m) - sample(before, "optim_batch_requests_count", model=m)
                  for m in ("mlp", "tokens"))
    assert requests == CLIENTS * REQUESTS_EACH
    assert batches < requests  # requests shared batches


def test_bad_requests_get_4xx_naming_the_tensor_and_the_server_keeps_serving(client, server):
    before = metrics(server)
    x = np.zeros((2, 32), np.float32)
    cases = [
        (lambda: client.infer("nope", [infer_input("x", x)]), "404", "no model named 'nope'; served: fixed, mlp, tokens"),
        (lambda: client.infer("mlp", [infer_input("x", x)], model_version="2"), "404",
         "model 'mlp' has no version '2'; served: 1"),
        (lambda: client.infer("tokens", [infer_input("ids", np.zeros((1, 3), np.int64))]), "400",
         "model 'tokens' needs input(s) 'mask' (FP32 [batch, seq])"),
        (lambda: client.infer("mlp", [infer_input("x", x), infer_input("z", x)]), "400",
         "model 'mlp' has no input(s) 'z'; its inputs are x"),
        (lambda: client.infer("mlp", [infer_input("x", x.astype(np.float64))]), "400",
         "input 'x' of model 'mlp' is FP32 [batch, 32], the request gave FP64"),
        (lambda: client.infer("mlp", [infer_input("x", x[:, :31].copy())]), "400",
         "input 'x' of model 'mlp' is FP32 [batch, 32], the request gave shape [2, 31]"),
        (lambda: client.infer("fixed", [infer_input("x", np.zeros((3, 4), np.float32))]), "400",
         "input 'x' of model 'fixed' is FP32 [2, 4], the request gave shape [3, 4]"),
        (lambda: client.infer("tokens", [infer_input("ids", np.zeros((1, 3), np.int64)),
                                         infer_input("mask", np.zeros((1, 4), np.float32))]), "400",
         "input 'mask' of model 'tokens' has dim 'seq' 4 but input 'ids' has 3: they must agree"),
        (lambda: client.infer("mlp", [infer_input("x", x)], outputs=[triton.InferRequestedOutput("h")]), "400",
         "model 'mlp' has no output(s) 'h'; its outputs are y"),
    ]
    for call, status, message in cases:
        with pytest.raises(InferenceServerException) as caught:
            call()
        assert (caught.value.status(), caught.value.message()) == (status, message)
    raw = [(b"{\"inputs\": [", {}, "the request is not valid JSON (Expecting value: line 1 column 13 (char 12))"),
           (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 32], "data": [0.0] * 63}]}).encode(),
            {}, "input 'x': shape [2, 32] needs 64 value(s), 'data' has 63"),
           (b"{}", {"Inference-Header-Content-Length": "2"}, "the request must be a JSON object with an 'inputs' list")]
    for body, headers, message in raw:
        assert post(server, "/v2/models/mlp/infer", body, headers) == (400, {"error": message})
    # Still serving.
    assert client.infer("mlp", [infer_input("x", x)]).as_numpy("y").shape == (2, 10)
    after = metrics(server)
    assert sample(after, "optim_inference_failures_total", model="mlp", reason="bad_request") - \
        sample(before, "optim_inference_failures_total", model="mlp", reason="bad_request") == 7
    assert sample(after, "optim_inference_failures_total", model="", reason="unknown_model") >= 1


def test_metrics_text(client, server):
    client.infer("fixed", [infer_input("x", np.ones((2, 4), np.float32))])
    text = metrics(server)
    for family in ("optim_inference_requests_total", "optim_inference_failures_total", "optim_batch_size_bucket",
                   "optim_batch_requests_bucket", "optim_queue_seconds_bucket", "optim_compute_seconds_bucket",
                   "optim_request_seconds_bucket", "optim_queue_depth"):
        assert family in text, family
    assert sample(text, "optim_inference_requests_total", model="fixed") >= 1
    assert sample(text, "optim_batch_requests_bucket", model="fixed", le="1.0") >= 1  # no batch axis: one at a time
    assert sample(text, "optim_batch_requests_bucket", model="fixed", le="1.0") == \
        sample(text, "optim_batch_requests_count", model="fixed")
    assert sample(text, "optim_compute_seconds_count", model="fixed") >= 1
    assert sample(text, "optim_queue_depth", model="fixed") == 0


def held_model(repo):
    """The mlp model loaded, with its run held until `release` is set (and `started` set once it runs)."""
    from optim.serve.models import load

    model = load(repo / "mlp.onnx", threads=1)
    release, started, run = threading.Event(), threading.Event(), model.run

    def held(inputs):
        started.set()
        release.wait()
        return run(inputs)

    model.run = held
    return model, release, started


def test_full_queue_503_and_timeout_504(repo):
    import optim.serve
    from optim.serve.server import BackgroundServer

    model, release, started = held_model(repo)
    app = optim.serve.app({"mlp": model}, max_batch=1, max_queue=1, timeout_s=0.5)
    x = np.zeros((1, 32), np.float32)
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": x.ravel().tolist()}]})
    with BackgroundServer(app) as server, ThreadPoolExecutor(2) as pool:
        running = pool.submit(post, server, "/v2/models/mlp/infer", body.encode())
        started.wait()
        queued = pool.submit(post, server, "/v2/models/mlp/infer", body.encode())
        while sample(metrics(server), "optim_queue_depth", model="mlp") < 1:
            time.sleep(0.01)
        status, answer = post(server, "/v2/models/mlp/infer", body.encode())
        assert status == 503 and "retry later" in answer["error"]
        assert running.result() == (504, {"error": "model 'mlp' did not answer within 0.5 s"})
        assert queued.result()[0] == 504
        release.set()
        assert post(server, "/v2/models/mlp/infer", body.encode())[0] == 200
        text = metrics(server)
    for reason, count in (("queue_full", 1), ("timeout", 2)):
        assert sample(text, "optim_inference_failures_total", model="mlp", reason=reason) == count


def test_a_failing_model_is_a_500_with_its_cause_and_the_server_goes_on(repo):
    import optim.serve
    from optim.serve.models import load
    from optim.serve.server import BackgroundServer

    model = load(repo / "mlp.onnx", threads=1)
    run = model.run

    def fails_on_nan(inputs):
        if np.isnan(inputs["x"]).any():
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : NaN seen")
        return run(inputs)

    model.run = fails_on_nan
    x = np.ones((1, 32), np.float32)
    with BackgroundServer(optim.serve.app({"mlp": model}, max_batch=1)) as server:
        client = triton.InferenceServerClient(server.url)
        with pytest.raises(InferenceServerException) as caught:
            client.infer("mlp", [infer_input("x", x * np.nan)])
        assert (caught.value.status(), caught.value.message()) == ("500", "model 'mlp' failed: NaN seen")
        assert_close(client.infer("mlp", [infer_input("x", x)]).as_numpy("y"), run({"x": x})["y"])
        assert sample(metrics(server), "optim_inference_failures_total", model="mlp", reason="model_error") == 1
        client.close()


def test_shutdown_answers_the_request_in_flight(repo):
    import optim.serve
    from optim.serve.server import BackgroundServer

    model, release, started = held_model(repo)
    x = np.random.default_rng(3).standard_normal((2, 32)).astype(np.float32)
    server = BackgroundServer(optim.serve.app({"mlp": model})).start()
    client = triton.InferenceServerClient(server.url)
    with ThreadPoolExecutor(2) as pool:
        answer = pool.submit(lambda: client.infer("mlp", [infer_input("x", x)]).as_numpy("y"))
        started.wait()
        stopping = pool.submit(server.stop)
        while server.server.servers[0].is_serving():  # shutdown has begun: no new connections
            time.sleep(0.01)
        release.set()
        stopping.result()
        assert_close(answer.result(), direct(repo / "mlp.onnx", {"x": x})["y"], what="in-flight answer")
    assert not server._thread.is_alive()
    client.close()
