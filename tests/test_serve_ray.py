"""optim.serve.ray on a local Ray instance (2 CPUs): a model deployed on Ray Serve with 2 replicas and Ray's own
batching answers concurrent DeploymentHandle calls with the direct session's outputs, keeps requests of different
shapes apart, refuses a bad input naming it, and answers tritonclient over Ray Serve's HTTP proxy (binary tensors).
A causal LM deployed as the /v1 application answers the openai client, plainly and streamed, with what it generates
alone. Starting Ray takes most of this test's time (20-40 s on 2 cores)."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import tritonclient.http as triton

from helpers import assert_close
from serve_helpers import direct, write_repository

# Ray Serve's own modules warn about pydantic's deprecations on import.
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REQUESTS = 12
RAY_CPUS = 2
REPLICA_CPUS = 0.5  # two replicas of mlp, one of tokens and one of the language models fit in RAY_CPUS


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    ray = pytest.importorskip("ray")
    from ray import serve

    import optim.serve.ray as optim_ray

    from optim.exporter import export

    repo = write_repository(tmp_path_factory.mktemp("repo"))
    lm = tmp_path_factory.mktemp("lm") / "llama_tiny.onnx"
    export("llama_tiny", lm)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # tokens on one replica, so that its batch counts are the whole story.
        handles = {name: optim_ray.deploy(repo / f"{name}.onnx", replicas=replicas, max_batch=4, max_delay_ms=50,
                                          num_cpus=REPLICA_CPUS) for name, replicas in (("mlp", 2), ("tokens", 1))}
        optim_ray.deploy_language_models({"llama_tiny": (lm, "1")}, max_batch=4, num_cpus=REPLICA_CPUS)
        yield repo, handles, f"127.0.0.1:{port}", lm
    finally:
        serve.shutdown()
        ray.shutdown()


def test_concurrent_handle_calls_equal_the_direct_session(deployed):
    repo, handles, *_ = deployed
    rng = np.random.default_rng(11)
    inputs = [{"x": rng.standard_normal((1 + i % 3, 32)).astype(np.float32)} for i in range(REQUESTS)]
    responses = [handles["mlp"].infer.remote(x) for x in inputs]  # all in flight at once
    for x, response in zip(inputs, responses):
        assert_close(response.result()["y"], direct(repo / "mlp.onnx", x)["y"], what="mlp y on Ray")
    # Two sequence lengths in flight together: Ray's batches hold both, run as separate groups.
    feeds = [{"ids": rng.integers(0, 50, (1, seq)), "mask": np.ones((1, seq), np.float32)} for seq in (4, 7) * 4]
    before = handles["tokens"].batch_counts.remote().result()
    responses = [handles["tokens"].infer.remote(f) for f in feeds]
    for f, response in zip(feeds, responses):
        got, expected = response.result(), direct(repo / "tokens.onnx", f)
        assert_close(got["y"], expected["y"], what="tokens y on Ray")
        assert_close(got["s"], expected["s"], what="tokens s on Ray")
    after = handles["tokens"].batch_counts.remote().result()
    assert after["requests"] - before["requests"] == len(feeds)
    assert after["batches"] - before["batches"] < len(feeds)  # Ray's @serve.batch gathered them


def test_a_bad_input_is_refused_naming_it(deployed):
    _, handles, *_ = deployed
    with pytest.raises(Exception, match=r"input 'x' of model 'mlp' is FP32 \[batch, 32\], the request gave shape \[1, 5\]"):
        handles["mlp"].infer.remote({"x": np.zeros((1, 5), np.float32)}).result()


def test_tritonclient_over_the_ray_http_proxy(deployed):
    repo, _, url, _ = deployed
    client = triton.InferenceServerClient(url)
    assert client.get_model_metadata("mlp")["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 32]}]
    x = np.random.default_rng(12).standard_normal((3, 32)).astype(np.float32)
    tensor = triton.InferInput("x", [3, 32], "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    result = client.infer("mlp", [tensor], outputs=[triton.InferRequestedOutput("y", binary_data=True)])
    assert_close(result.as_numpy("y"), direct(repo / "mlp.onnx", {"x": x})["y"], what="mlp y over HTTP")
    bad = triton.InferInput("x", [3, 32], "FP64")
    bad.set_data_from_numpy(x.astype(np.float64))
    with pytest.raises(triton.InferenceServerException, match="the request gave FP64"):
        client.infer("mlp", [bad])
    client.close()


def test_the_openai_client_over_the_ray_http_proxy(deployed):
    """The causal LM on Ray (its /v1 application): a greedy completion equals the model's own generation, and a
    stream of several requests at once each yield theirs."""
    openai = pytest.importorskip("openai")
    from concurrent.futures import ThreadPoolExecutor

    from optim.llm import ByteTokenizer, CausalLM, generate

    *_, url, lm = deployed
    tok = ByteTokenizer()
    model = CausalLM(lm, threads=1)
    prompts = ["Hello", "The quick brown fox", "zz"]
    alone = {p: tok.decode(generate(model, [tok.encode(p)], max_new_tokens=8, eos=False)[0][0].token_ids)
             for p in prompts}
    client = openai.OpenAI(base_url=f"http://{url}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["llama_tiny"]

    def streamed(prompt: str) -> str:
        chunks = client.completions.create(model="llama_tiny", prompt=prompt, max_tokens=8, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True})
        return "".join(c.choices[0].text for c in chunks if c.choices)

    out = client.completions.create(model="llama_tiny", prompt="Hello", max_tokens=8, temperature=0,
                                    extra_body={"ignore_eos": True})
    assert out.choices[0].text == alone["Hello"] and out.usage.completion_tokens == 8
    with ThreadPoolExecutor(len(prompts)) as pool:
        assert list(pool.map(streamed, prompts)) == [alone[p] for p in prompts]
