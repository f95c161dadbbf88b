"""Decoder-only language models (Hugging Face `*ForCausalLM`, GPT-2's `GPT2LMHeadModel`) to one ONNX graph with a
KV cache, serving both prefill and decode, verified against PyTorch over a prefill and several decode steps.

The graph (names as ONNX Runtime GenAI and Optimum spell them):
  inputs   input_ids [batch, sequence] int64, attention_mask [batch, total] int64 (total = past + sequence; 0 marks
           left padding), position_ids [batch, sequence] int64, past_key_values.{i}.key / .value
           [batch, kv_heads, past, head_dim] float32 per layer (past = 0 for a prefill)
  outputs  logits [batch, sequence, vocab] float32, present.{i}.key / .value [batch, kv_heads, total, head_dim]
The file's metadata (`optim.causal_lm`, JSON: llm/info.py's CausalLMInfo) carries what a generation loop needs:
layers, kv heads, head dim, vocabulary, the end-of-sequence and beginning-of-sequence ids.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from optim.common.comparison import Tolerance
from optim.common.staging import staged_output
from optim.llm.info import METADATA_KEY, CausalLMInfo, positions

from .errors import ExportError, first_line
from .loading import LoadedModel
from .quiet import quiet
from .result import ExportResult, describe_values
from .to_onnx import DYNAMO, EXPORTERS, EXTERNAL_DATA_BYTES, TORCHSCRIPT
from .verify import check_against_torch, report_row

log = logging.getLogger("optim.exporter")

# The tokenizer files a Hugging Face folder may carry, copied beside the exported model for `optim generate`.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
# Verification: a left-padded batch of two prompts (lengths 7 and 4), then this many greedy decode steps.
VERIFY_PROMPT_LENGTHS = (7, 4)
VERIFY_DECODE_STEPS = 4


def is_causal_lm(module) -> bool:
    """Whether `module` is a transformers decoder-only language model with a cache (what this file exports)."""
    config = getattr(module, "config", None)
    return (config is not None and hasattr(module, "generate") and not getattr(config, "is_encoder_decoder", False)
            and type(module).__name__.endswith(("ForCausalLM", "LMHeadModel")))


def causal_lm_info(model) -> CausalLMInfo:
    c = model.config
    heads = c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    eos = c.eos_token_id
    eos_ids = [] if eos is None else [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]
    max_positions = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)
    return CausalLMInfo(layers=c.num_hidden_layers, kv_heads=kv_heads, head_dim=head_dim, vocab=c.vocab_size,
                        eos_token_ids=eos_ids, bos_token_id=c.bos_token_id, max_positions=max_positions,
                        model_type=getattr(c, "model_type", ""))


class KVCacheModel(nn.Module):
    """The LM with its cache as flat tensors: (input_ids, attention_mask, position_ids, past key, past value, ...)
    -> (logits, present key, present value, ...), one pair per layer."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True, return_dict=True)
        presents = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits, *presents)


def export_causal_lm(loaded: LoadedModel, output: str | Path, opset: int, exporter: str, verify: bool,
                     tolerance: Tolerance, verbose: bool, say: Callable[[str], None]) -> ExportResult:
    """Writes loaded.module (a causal LM, is_causal_lm) with its KV cache to `output` (see the module docstring),
    the tokenizer files of a Hugging Face folder beside it; verifies it on ONNX Runtime's CPU EP against PyTorch
    over a left-padded prefill and VERIFY_DECODE_STEPS greedy steps. Raises ExportError / VerificationError."""
    if exporter not in EXPORTERS:
        raise ExportError(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}")
    info = causal_lm_info(loaded.module)
    say(f"a causal LM ({info.model_type or type(loaded.module).__name__}): {info.layers} layers, {info.kv_heads} KV "
        f"heads of {info.head_dim}, vocabulary {info.vocab}; exporting it with its KV cache")
    wrapper = KVCacheModel(loaded.module).eval()
    args = _trace_inputs(info)
    weight_bytes = sum(p.numel() * p.element_size() for p in loaded.module.state_dict().values())
    with staged_output(output, error=ExportError) as staged:
        used = _export(wrapper, args, info, opset, exporter, staged, weight_bytes > EXTERNAL_DATA_BYTES, verbose, say)
        _write_metadata(staged, info)
        _copy_tokenizer(loaded, staged)
        report = verify_causal_lm(staged, loaded.module, info, tolerance, say) if verify else []
        if not verify:
            log.warning("%s was not verified against PyTorch (verify=False)", output)
        onnx_inputs, onnx_outputs = describe_values(staged)
    return ExportResult(str(output), loaded.kind, used, opset, onnx_inputs, onnx_outputs, report, {}, verified=verify)


def _trace_inputs(info: CausalLMInfo) -> tuple:
    # A past longer than 0 (with 0 the cache's length check is frozen into the graph) and batch, sequence and past
    # all different sizes, so that no axis is mistaken for another.
    batch, sequence, past = 2, 3, 4
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, info.vocab, (batch, sequence), generator=generator)
    mask = torch.ones(batch, past + sequence, dtype=torch.int64)
    pos = torch.arange(past, past + sequence).unsqueeze(0).expand(batch, -1).contiguous()
    cache = [torch.randn(batch, info.kv_heads, past, info.head_dim, generator=generator) for _ in range(2 * info.layers)]
    return (ids, mask, pos, *cache)


def _export(wrapper: nn.Module, args: tuple, info: CausalLMInfo, opset: int, exporter: str, path: Path,
            external: bool, verbose: bool, say: Callable[[str], None]) -> str:
    order = [DYNAMO, TORCHSCRIPT] if exporter == "auto" else [exporter]
    failures = []
    for name in order:
        say(f"exporting with the {name} exporter (opset {opset})")
        try:
            with quiet(verbose), torch.no_grad():
                if name == DYNAMO:
                    _dynamo(wrapper, args, info, opset, path, external, verbose)
                else:
                    _torchscript(wrapper, args, info, opset, path, verbose)
            return name
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {first_line(e)}")
            for leftover in (path, Path(f"{path}.data")):
                leftover.unlink(missing_ok=True)
            if name != order[-1]:
                say(f"the {name} exporter failed; trying the {order[-1]} exporter")
    raise ExportError("the causal LM could not be exported: " + "; ".join(failures))


def _dynamo(wrapper, args, info, opset, path, external, verbose) -> None:
    batch, sequence, past, total = (torch.export.Dim(n) for n in ("batch", "sequence", "past", "total"))
    cache_dims = tuple({0: batch, 2: past} for _ in range(2 * info.layers))
    # forward(input_ids, attention_mask, position_ids, *past): the cache's dims are one nested tuple.
    dynamic_shapes = ({0: batch, 1: sequence}, {0: batch, 1: total}, {0: batch, 1: sequence}, cache_dims)
    program = torch.onnx.export(wrapper, args, dynamo=True, opset_version=opset, input_names=info.input_names(),
                                output_names=info.output_names(), dynamic_shapes=dynamic_shapes, verbose=verbose)
    program.save(str(path), external_data=external)
    _rename_output_dims(path)


def _torchscript(wrapper, args, info, opset, path, verbose) -> None:
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
    for i in range(info.layers):
        for kv in ("key", "value"):
            axes[f"past_key_values.{i}.{kv}"] = {0: "batch", 2: "past"}
            axes[f"present.{i}.{kv}"] = {0: "batch", 2: "total"}
    torch.onnx.export(wrapper, args, str(path), dynamo=False, opset_version=opset, input_names=info.input_names(),
                      output_names=info.output_names(), dynamic_axes=axes, verbose=verbose)


def _rename_output_dims(path: Path) -> None:
    """The dynamo exporter names the presents' length "past + sequence" (an expression); call it "total" as the
    mask's, so every tool reads one dim name."""
    model = onnx.load(str(path), load_external_data=False)
    changed = False
    for value in model.graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and "+" in dim.dim_param:
                dim.dim_param = "total"
                changed = True
    if changed:
        onnx.save(model, str(path))


def _write_metadata(path: Path, info: CausalLMInfo) -> None:
    model = onnx.load(str(path), load_external_data=False)
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props}, METADATA_KEY: info.to_json()})
    onnx.save(model, str(path))


def _copy_tokenizer(loaded: LoadedModel, staged: Path) -> None:
    folder = Path(loaded.source)
    if not folder.is_dir():
        return
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            shutil.copyfile(folder / name, staged.parent / name)


def verify_causal_lm(path: Path, model: nn.Module, info: CausalLMInfo, tolerance: Tolerance,
                     say: Callable[[str], None]) -> list[dict]:
    """The exported file on ONNX Runtime's CPU EP against the PyTorch model with its own cache: a prefill of two
    left-padded prompts, then VERIFY_DECODE_STEPS greedy steps fed the same tokens on both sides. One report row
    per check ("prefill", "decode 1", ...) for the logits and one for the last presents; VerificationError when
    one fails."""
    from optim.ep_plugin import cpu_session

    from .errors import VerificationError

    say(f"verifying against PyTorch on ONNX Runtime's CPU EP: a prefill of {len(VERIFY_PROMPT_LENGTHS)} left-padded "
        f"prompts, then {VERIFY_DECODE_STEPS} decode steps")
    session = cpu_session(str(path), optimization="disable")
    rng = np.random.default_rng(0)
    longest = max(VERIFY_PROMPT_LENGTHS)
    ids = rng.integers(0, info.vocab, (len(VERIFY_PROMPT_LENGTHS), longest)).astype(np.int64)
    mask = np.array([[0] * (longest - n) + [1] * n for n in VERIFY_PROMPT_LENGTHS], dtype=np.int64)
    past = info.empty_cache(len(ids))
    torch_cache = None
    rows = []
    for step in range(VERIFY_DECODE_STEPS + 1):
        check = "prefill" if step == 0 else f"decode {step}"
        pos = positions(mask, ids.shape[1])
        got = session.run(None, {"input_ids": ids, "attention_mask": mask, "position_ids": pos, **past})
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                        position_ids=torch.from_numpy(pos), past_key_values=torch_cache, use_cache=True, return_dict=True)
        torch_cache = out.past_key_values
        want_presents = [t.numpy() for layer in torch_cache.layers for t in (layer.keys, layer.values)]
        logits = check_against_torch("logits", got[0], out.logits.numpy(), tolerance)
        presents = [check_against_torch(name, g, w, tolerance)
                    for name, g, w in zip(info.output_names()[1:], got[1:], want_presents)]
        worst = max(presents, key=lambda c: (not c.passed, c.max_abs))
        rows += [report_row(check, logits), report_row(check, worst)]
        past = dict(zip(past, got[1:]))
        ids = got[0][:, -1:].argmax(-1).astype(np.int64)  # greedy next tokens, the same on both sides
        mask = np.concatenate([mask, np.ones((len(ids), 1), np.int64)], axis=1)
    failed = [r for r in rows if not r["passed"]]
    if failed:
        raise VerificationError(
            "verification against PyTorch failed, so no file was written: " + "; ".join(
                f"{r['output']} at {r['check']}: max abs error {r['max_abs']:.3g} (tolerance {r['tolerance']})"
                for r in failed), report=rows)
    return rows
