"""Causal LMs end to end: `optim export` with the KV cache (verified over a prefill and decode steps), then
generation on OptimEP with greedy tokens equal to PyTorch's own generate() over 32 steps, sampling, stop strings,
end-of-sequence, streaming, and the `optim generate` command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from optim.common.errors import UserError
from optim.exporter import export
from optim.llm import ByteTokenizer, CausalLM, Sampling, generate, read_info
from optim.models import get as zoo_get

TINY = ("llama_tiny", "gpt2_tiny", "qwen2_tiny")
PROMPTS = ["Hello, world", "abc"]
STEPS = 32


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("llm")
    paths = {}
    for name in TINY:
        paths[name] = out / f"{name}.onnx"
        result = export(name, paths[name])
        assert result.passed
        paths[name + ".report"] = result
    return paths


@pytest.mark.parametrize("name", TINY)
def test_export_is_verified_over_prefill_and_decode_steps(exported, name):
    result = exported[name + ".report"]
    checks = {row["check"] for row in result.report}
    assert {"prefill", "decode 1", "decode 4"} <= checks
    assert all(row["passed"] for row in result.report)
    names = [i["name"] for i in result.inputs]
    assert names[:3] == ["input_ids", "attention_mask", "position_ids"]
    assert names[3:5] == ["past_key_values.0.key", "past_key_values.0.value"]
    assert result.inputs[3]["shape"] == ["batch", 2 if name != "gpt2_tiny" else 4, "past", 16]
    assert result.outputs[1]["shape"][2] == "total"
    info = read_info(exported[name])
    assert (info.layers, info.vocab, info.eos_token_ids) == (2, 256, [2])


def _torch_greedy(name: str, prompt: list[int], steps: int) -> list[int]:
    net = zoo_get(name).factory()
    with torch.no_grad():
        out = net.generate(torch.tensor([prompt]), max_new_tokens=steps, do_sample=False, eos_token_id=None,
                           pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("name", ["llama_tiny", "gpt2_tiny"])
def test_greedy_tokens_equal_pytorch_over_32_steps_on_optimep(exported, name):
    model = CausalLM(exported[name], threads=1)
    prompts = [ByteTokenizer().encode(p) for p in PROMPTS]  # one batch: the shorter prompt left-padded
    rows, stats = generate(model, prompts, max_new_tokens=STEPS, eos=False)
    for prompt, row in zip(prompts, rows):
        assert row.token_ids == _torch_greedy(name, prompt, STEPS)
        assert row.finish_reason == "length"
    assert stats.generated_tokens == 2 * STEPS and stats.decode_steps == STEPS - 1
    assert stats.prefill_tokens_per_s > 0 and stats.decode_tokens_per_s > 0


def test_what_optimep_leaves_is_shape_arithmetic(exported):
    from optim.ep_plugin import placement

    model = CausalLM(exported["llama_tiny"], threads=1)
    report = placement(model.session)
    assert report.fraction > 0.9
    # Left to the CPU EP: values that decide shapes (by design) and int64 position arithmetic.
    left = [(n.op, n.reason) for n in report.fallback]
    assert all("decides the shape" in reason or (op in ("Add", "Sub") and "int64" in reason) for op, reason in left), left


def test_sampling_is_seeded_and_cut_by_top_k_and_top_p(exported):
    model = CausalLM(exported["llama_tiny"], threads=1)
    prompt = [ByteTokenizer().encode("Once")]

    def tokens(sampling: Sampling) -> list[int]:
        return generate(model, prompt, max_new_tokens=12, sampling=sampling, eos=False)[0][0].token_ids

    greedy = tokens(Sampling())
    assert tokens(Sampling(temperature=1.5, top_k=1, seed=5)) == greedy  # one candidate: the most likely
    assert tokens(Sampling(temperature=1.5, top_p=1e-6, seed=5)) == greedy  # the smallest set: the most likely
    hot = tokens(Sampling(temperature=2.0, seed=7))
    assert hot == tokens(Sampling(temperature=2.0, seed=7))
    assert hot != tokens(Sampling(temperature=2.0, seed=8))
    with pytest.raises(ValueError):
        Sampling(top_p=0)


def test_stop_strings_cut_the_text_and_streaming_sends_it_whole(exported):
    model = CausalLM(exported["llama_tiny"], threads=1)
    tok = ByteTokenizer()
    # Printable greedy text: a prompt whose continuation has a stop string to find.
    full = generate(model, [tok.encode("Hello, world")], max_new_tokens=24, decode=tok.decode, eos=False)[0][0]
    stop = full.text[6:8]
    assert stop and full.text.find(stop) == 6
    pieces = []
    rows, _ = generate(model, [tok.encode("Hello, world")], max_new_tokens=24, decode=tok.decode, stop=[stop],
                       eos=False, on_text=lambda _r, text: pieces.append(text))
    assert rows[0].finish_reason == "stop"
    assert rows[0].text == full.text[:6]
    assert "".join(pieces) == rows[0].text


def test_an_end_of_sequence_token_ends_its_row_only(exported):
    model = CausalLM(exported["llama_tiny"], threads=1)
    tok = ByteTokenizer()
    prompts = [tok.encode(p) for p in PROMPTS]
    free = generate(model, prompts, max_new_tokens=10, eos=False)[0]
    model.info.eos_token_ids = [free[0].token_ids[3]]  # the first row's fourth token ends it
    rows, _ = generate(model, prompts, max_new_tokens=10)
    assert rows[0].finish_reason == "eos" and rows[0].token_ids == free[0].token_ids[:3]
    if model.info.eos_token_ids[0] not in free[1].token_ids:
        assert rows[1].token_ids == free[1].token_ids and rows[1].finish_reason == "length"


def test_bad_requests_say_what_to_fix(exported, tmp_path):
    model = CausalLM(exported["llama_tiny"], threads=1)
    with pytest.raises(UserError, match="outside the model's vocabulary"):
        generate(model, [[300]], max_new_tokens=2)
    with pytest.raises(UserError, match="at least one token"):
        generate(model, [[]], max_new_tokens=2)
    with pytest.raises(UserError, match="need a tokenizer"):
        generate(model, [[1, 2]], max_new_tokens=2, stop=["x"])
    from optim.ep_plugin import session  # noqa: F401  (a plain model, not exported as a causal LM)

    plain = tmp_path / "plain.onnx"
    export("mlp", plain)
    with pytest.raises(UserError, match="not exported as a causal LM"):
        CausalLM(plain)


def _optim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optim.cli", *args], capture_output=True, text=True, timeout=300)


def test_the_generate_command_streams_and_summarises(exported):
    path = str(exported["llama_tiny"])
    done = _optim("generate", path, "--prompt", "Hello, world", "--max-new-tokens", "8", "--ignore-eos", "--threads", "1")
    assert done.returncode == 0, done.stderr
    want = ByteTokenizer().decode(_torch_greedy("llama_tiny", ByteTokenizer().encode("Hello, world"), 8))
    assert done.stdout.rstrip("\n") == want
    assert "time to first token" in done.stderr and "decode" in done.stderr
    as_json = _optim("generate", path, "--prompt-ids", "72,105", "--prompt-ids", "1", "--max-new-tokens", "4",
                     "--ignore-eos", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [len(r["token_ids"]) for r in data["rows"]] == [4, 4]
    assert data["stats"]["decode_tokens_per_s"] > 0 and "on OptimEP" in data["placement"]


def test_the_generate_command_refuses_bad_input(exported, tmp_path):
    path = str(exported["llama_tiny"])
    assert "give a prompt" in _optim("generate", path).stderr
    bad = _optim("generate", path, "--prompt-ids", "1,x")
    assert bad.returncode == 2 and "comma-separated integers" in bad.stderr


def test_a_hugging_face_folder_exports_with_its_tokenizer(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    folder = tmp_path / "tiny-llama"
    zoo_get("llama_tiny").factory().save_pretrained(folder)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    text = ["the quick brown fox jumps over the lazy dog"] * 20 + ["once upon a time there was a model"] * 20
    tokenizer.train_from_iterator(text, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"]))
    tokenizer.save(str(folder / "tokenizer.json"))
    out = tmp_path / "exported" / "model.onnx"
    result = export(folder, out)
    assert result.passed and result.kind == "hugging face folder"
    assert (out.parent / "tokenizer.json").is_file()
    done = _optim("generate", str(out), "--prompt", "the quick brown", "--max-new-tokens", "5", "--ignore-eos",
                  "--json")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["rows"][0]
    assert len(row["token_ids"]) == 5 and row["prompt_ids"] == tokenizer.encode("the quick brown").ids
    empty = tmp_path / "weightless"
    empty.mkdir()
    shutil.copy(folder / "config.json", empty / "config.json")
    with pytest.raises(Exception, match="no weights"):
        export(empty, tmp_path / "w.onnx")


@pytest.mark.parametrize("name", ["llama_tiny", "gpt2_tiny"])
def test_weight_only_int4_runs_on_optimep_and_reports_its_accuracy(exported, name, tmp_path):
    from optim.ep_plugin import cpu_session, placement
    from optim.optimizer.quantization.weight_only import quantize_weights

    out = tmp_path / f"{name}.int4.onnx"
    result = quantize_weights(exported[name], out, bits=4, block=32)
    assert result.quantized_nodes >= 8 and result.bytes_after < result.bytes_before / 2
    # The head too, where it is tied to the embedding (GPT-2's reads the table through a Transpose).
    import onnx

    heads = [n.op_type for n in onnx.load(str(out)).graph.node if "logits" in n.output]
    assert heads == ["MatMulNBits"], heads
    acc = result.accuracy
    assert acc["kind"] == "causal_lm" and acc["tokens"] == 128
    assert 0.9 < acc["cosine_mean"] <= 1 and 0 <= acc["top1_agreement"] <= 1
    assert acc["ppl_float"] > 1 and acc["ppl_quantized"] > 1
    model = CausalLM(out, threads=1)
    on_cpu = [n for n in placement(model.session).fallback if n.op == "MatMulNBits"]
    assert not on_cpu, on_cpu
    # The same file on both runtimes: teacher-forced logits of a prompt agree within float rounding.
    ids = np.array([ByteTokenizer().encode("The int4 weights of a tiny model")], np.int64)
    mask = np.ones_like(ids)
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": np.arange(ids.shape[1])[None],
             **{n: np.zeros((1, model.info.kv_heads, 0, model.info.head_dim), np.float32) for n in model.info.cache_names()}}
    ours = model.start(ids.tolist(), every_position=True)[1]
    ref = cpu_session(str(out), optimization="disable").run(["logits"], feeds)[0]
    assert np.abs(ours - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))
    rows, _ = generate(model, [ByteTokenizer().encode("Hi")], max_new_tokens=8, eos=False)
    assert len(rows[0].token_ids) == 8


def test_the_quantize_command_writes_weight_only_models(exported, tmp_path):
    out = tmp_path / "q.onnx"
    done = _optim("quantize", str(exported["qwen2_tiny"]), "-o", str(out), "--weights", "int8", "--block", "64",
                  "--symmetric", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["bits"], data["block"], data["symmetric"]) == (8, 64, True)
    assert data["accuracy"]["cosine_mean"] > 0.99  # 8-bit weights: close to float
    import onnx

    nodes = [n for n in onnx.load(str(out)).graph.node if n.op_type == "MatMulNBits"]
    assert nodes and all({a.name: a.i for a in n.attribute if a.name in ("bits", "block_size")} ==
                         {"bits": 8, "block_size": 64} for n in nodes)
    mixed = _optim("quantize", str(exported["qwen2_tiny"]), "-o", str(tmp_path / "x.onnx"), "--weights", "int4",
                   "--calib-random", "4")
    assert mixed.returncode == 2 and "weights only" in mixed.stderr
    plain = tmp_path / "mlp.onnx"
    export("mlp", plain)
    done = _optim("quantize", str(plain), "-o", str(tmp_path / "mlp4.onnx"), "--weights", "int4")
    assert done.returncode == 0, done.stderr
    assert "accuracy of output" in done.stdout and "cosine" in done.stdout


def test_int8_activations_are_written_measured_and_run(exported, tmp_path):
    """--int8-activations: accuracy_level 4 on every MatMulNBits (tests/ep/test_matmul_nbits.py checks the integer
    kernels it selects), its cost in the report, and generation on it."""
    from optim.optimizer.quantization.weight_only import quantize_weights

    plain, q8 = tmp_path / "plain.onnx", tmp_path / "q8.onnx"
    result = quantize_weights(exported["llama_tiny"], q8, bits=4, block=32, int8_activations=True)
    assert result.int8_activations and "int8 activations" in result.lines()[0]
    assert result.accuracy["cosine_mean"] > 0.98
    import onnx

    levels = {a.i for n in onnx.load(str(q8)).graph.node if n.op_type == "MatMulNBits" for a in n.attribute
              if a.name == "accuracy_level"}
    assert levels == {4}
    rows, _ = generate(CausalLM(q8, threads=1), [ByteTokenizer().encode("Hi")], max_new_tokens=4, eos=False)
    assert len(rows[0].token_ids) == 4
    plain_accuracy = quantize_weights(exported["llama_tiny"], plain, bits=4, block=32).accuracy
    assert abs(plain_accuracy["cosine_mean"] - result.accuracy["cosine_mean"]) < 0.01


@pytest.mark.parametrize("name", TINY)
def test_the_cache_is_kept_in_place_and_generates_what_a_copied_cache_does(exported, name):
    """On OptimEP each cache is a buffer bound as past and present both (llm/cache_layout.py): the attention reads it
    where it lies (one GroupAttention per layer, its Slice taken in), the buffers are bound again only when they
    grow, and the tokens are those of the cache copied each step as the file has it."""
    from optim.ep_plugin import placement

    in_place = CausalLM(exported[name], threads=1)
    copied = CausalLM(exported[name], threads=1, in_place_cache=False)
    assert in_place.in_place_cache and not copied.in_place_cache
    report = placement(in_place.session)
    assert report.rewrites.get("group_attention") == 2, report.rewrites
    steps = [s for steps in report.compiled.values() for s in steps]
    assert not [s for s in steps if "/cut'" in s], steps  # the cache's Slices are in the attention
    assert len([s for s in steps if s.startswith("ScatterND")]) == 4, steps
    prompts = [ByteTokenizer().encode(p) for p in PROMPTS]
    batches, logits = zip(*(m.start(prompts) for m in (in_place, copied)))
    buffer = batches[0].cache["past_key_values.0.key"]
    bindings = []
    for step in range(60):  # past the first buffer's capacity: it grows, keeping what it held
        np.testing.assert_allclose(logits[0], logits[1], rtol=1e-4, atol=1e-4, err_msg=f"step {step}")
        tokens = logits[1].argmax(-1)
        logits = [m.step(b, tokens) for m, b in zip((in_place, copied), batches)]
        bindings.append(batches[0].binding.io)
    grown = batches[0].cache["past_key_values.0.key"]
    assert grown.shape[2] > buffer.shape[2] >= len(PROMPTS[0]) and batches[0].length == batches[1].length
    assert len({id(b) for b in bindings}) == 2, "bound once per buffer, not per step"
    for key in batches[1].cache:
        np.testing.assert_allclose(batches[0].cache_view(key), batches[1].cache[key], rtol=1e-4, atol=1e-5)


def test_batch_rows_leave_and_join_alike_with_and_without_capacity():
    """Batch.keep / stacked (what the continuous batcher does between steps) give the same cache whether the
    arrays are exactly the cache or buffers with room beyond it."""
    from optim.llm.model import Batch

    rng = np.random.default_rng(1)
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], np.int64)
    cache = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    roomy = np.full((3, 2, 9, 4), np.nan, np.float32)  # a buffer with room beyond the 5 positions
    roomy[:, :, :5] = cache
    exact = Batch(mask, {"past_key_values.0.key": cache})
    buffered = Batch(mask.copy(), {"past_key_values.0.key": roomy}, in_place=True)
    joining = Batch(np.ones((1, 2), np.int64), {"past_key_values.0.key": np.ones((1, 2, 2, 4), np.float32)})
    for b in (exact, buffered):
        b.keep([0, 2], 1)
    a, b = exact.stacked(joining), buffered.stacked(joining)
    assert a.length == b.length == 4 and a.mask.tolist() == b.mask.tolist() and b.in_place
    np.testing.assert_array_equal(a.cache_view("past_key_values.0.key"), b.cache_view("past_key_values.0.key"))


def test_a_cache_read_elsewhere_is_copied_each_step(exported, tmp_path):
    """A graph whose past is read by more than its update (here: an extra output of it) keeps the exported layout,
    silently by default, with the reason when the in-place cache was asked for."""
    import onnx

    model = onnx.load(str(exported["llama_tiny"]))
    model.graph.node.append(onnx.helper.make_node("Identity", ["past_key_values.0.key"], ["past_copy"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info("past_copy", onnx.TensorProto.FLOAT, None))
    path = tmp_path / "read_elsewhere.onnx"
    onnx.save(model, str(path))
    assert not CausalLM(path, threads=1).in_place_cache
    with pytest.raises(UserError, match="read by Identity"):
        CausalLM(path, threads=1, in_place_cache=True)
