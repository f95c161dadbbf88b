"""Weight-only quantization (`optim quantize --weights int4|int8`): every MatMul with a constant float weight (and
every Gemm, rewritten to MatMul + Add first; and a head tied to the embedding table, which reads it through a
Transpose, given its own copy) becomes com.microsoft MatMulNBits with the weights in blocks of
`block` along K, each with a scale (and a zero point unless symmetric); activations stay float. onnxruntime's
MatMulNBitsQuantizer writes the nodes, so ONNX Runtime's CPU EP runs the same file as OptimEP does.

The report measures the quantized model against the float one on OptimEP: for a causal LM exported by `optim
export` (its `optim.causal_lm` metadata), teacher-forced next-token logits over a token sequence, half in a prefill
and half in decode steps (cosine, top-1 agreement, perplexity of both on that sequence); for other models, each output's cosine and SQNR on random inputs.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from optim.common.errors import UserError
from optim.common.staging import staged_output

log = logging.getLogger("optim.quantize")

BLOCK_SIZES = (16, 32, 64, 128, 256)
WEIGHT_BITS = {"int4": 4, "int8": 8}
# The token sequence a causal LM's report runs on when no text is given: seeded random ids of this length.
LM_REPORT_TOKENS = 128
# Above this many bytes the model's weights go to "<output>.data" (a protobuf cannot exceed 2 GiB).
EXTERNAL_DATA_BYTES = 1536 * 2**20


@dataclass
class WeightOnlyResult:
    path: str
    bits: int
    block: int
    symmetric: bool
    quantized_nodes: int
    float_matmuls: int  # MatMuls left float (a weight that is not a constant: attention's activation products)
    bytes_before: int
    bytes_after: int
    seconds: float
    accuracy: dict = field(default_factory=dict)
    int8_activations: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        how = f"blocks of {self.block}, {'symmetric' if self.symmetric else 'with zero points'}"
        if self.int8_activations:
            how += ", int8 activations (accuracy_level 4)"
        out = [f"weight-only int{self.bits}, {how} -> {self.path} in {self.seconds:.1f} s",
               f"{self.quantized_nodes} MatMul(s) quantized ({self.float_matmuls} left float: no constant weight); "
               f"weights {self.bytes_before / 2**20:.1f} MiB -> {self.bytes_after / 2**20:.1f} MiB"]
        a = self.accuracy
        if a.get("kind") == "causal_lm":
            out.append(f"accuracy on {a['tokens']} tokens ({a['text']}), teacher-forced (a prefill, then decode steps), "
                       f"on OptimEP: logits cosine "
                       f"mean {a['cosine_mean']:.5f} (lowest {a['cosine_min']:.5f}), top-1 agreement "
                       f"{a['top1_agreement']:.3f}, perplexity float {a['ppl_float']:.3f} -> quantized "
                       f"{a['ppl_quantized']:.3f} ({a['ppl_quantized'] / a['ppl_float'] - 1:+.2%})")
        if a.get("note"):
            out.append(a["note"])
        for row in a.get("outputs", []):
            out.append(f"accuracy of output {row['output']} on random inputs, on OptimEP: cosine {row['cosine']:.5f}, "
                       f"SQNR {row['sqnr_db']:.1f} dB")
        return out


def quantize_weights(model: str | os.PathLike, output: str | os.PathLike, bits: int = 4, block: int = 32,
                     symmetric: bool = False, int8_activations: bool = False, text_ids: list[int] | None = None,
                     progress: Callable[[str], None] | None = None) -> WeightOnlyResult:
    """Writes MODEL with its constant MatMul / Gemm weights quantized to `bits` (4 or 8) in blocks of `block`, and
    measures it against MODEL (see the module docstring). int8_activations: MatMulNBits' accuracy_level 4, each
    decode row of A quantized to int8 per block inside the op (OptimEP's u8 x s8 dot products: about 2x on AVX2;
    the CPU EP does the same); the report measures what it costs. text_ids: the token sequence a causal LM's report
    runs on (default: LM_REPORT_TOKENS seeded random ids)."""
    say = progress or (lambda _line: None)
    if bits not in (4, 8):
        raise UserError(f"weight-only quantization takes 4 or 8 bits, not {bits}")
    if block not in BLOCK_SIZES:
        raise UserError(f"--block {block} is not one of {', '.join(map(str, BLOCK_SIZES))}")
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    start = time.perf_counter()
    say(f"loading {model}")
    proto = onnx.load(os.fspath(model))
    before = _weight_bytes(proto)
    rewritten = gemm_as_matmul(proto)
    if rewritten:
        say(f"{rewritten} Gemm node(s) with a constant weight rewritten as MatMul + Add")
    untied = untie_transposed_weights(proto)
    if untied:
        say(f"{untied} MatMul(s) reading a transposed constant (a head tied to the embedding) given their own weight")
    say(f"quantizing MatMul weights to int{bits} in blocks of {block}")
    quantizer = MatMulNBitsQuantizer(proto, bits=bits, block_size=block, is_symmetric=symmetric,
                                     accuracy_level=4 if int8_activations else None,
                                     quant_format=QuantFormat.QOperator, op_types_to_quantize=("MatMul",))
    _quietly(quantizer.process)
    quantized = quantizer.model.model
    counts = _op_counts(quantized)
    if not counts.get("MatMulNBits"):
        raise UserError(f"{model} has no MatMul or Gemm with a constant float weight to quantize")
    with staged_output(output, error=UserError) as staged:
        onnx.save(quantized, str(staged), save_as_external_data=_weight_bytes(quantized) > EXTERNAL_DATA_BYTES,
                  location=f"{Path(output).name}.data")
        say("measuring the quantized model against the float one on OptimEP")
        accuracy = measure(os.fspath(model), str(staged), text_ids)
    return WeightOnlyResult(os.fspath(output), bits, block, symmetric, counts["MatMulNBits"], counts.get("MatMul", 0),
                            before, _weight_bytes(quantized), time.perf_counter() - start, accuracy, int8_activations)


def untie_transposed_weights(model: onnx.ModelProto) -> int:
    """Gives each MatMul(A, Transpose(W)) with W a 2-D float initializer its own W^T initializer (a language model's
    head tied to its embedding table, which a Gather reads as it is), so the quantizer, which takes constant weights
    only, quantizes it too: otherwise the largest matrix of a tied model stays float and decode reads it whole every
    token. The Transpose goes when nothing else reads it. Returns how many MatMuls."""
    inits = {t.name: t for t in model.graph.initializer}
    made = {n.output[0]: n for n in model.graph.node if n.op_type == "Transpose" and n.domain in ("", "ai.onnx")}
    count, bypassed = 0, []
    for n in model.graph.node:
        t = made.get(n.input[1]) if n.op_type == "MatMul" and n.domain in ("", "ai.onnx") else None
        if t is None or t.input[0] not in inits:
            continue
        perm = next((helper.get_attribute_value(a) for a in t.attribute if a.name == "perm"), [1, 0])
        w = inits[t.input[0]]
        if list(perm) != [1, 0] or len(w.dims) != 2 or w.data_type != onnx.TensorProto.FLOAT:
            continue
        name = t.input[0] + "_t"
        if name not in inits:
            inits[name] = numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(w).T), name)
            model.graph.initializer.append(inits[name])
        n.input[1] = name
        bypassed.append(t)
        count += 1
    read = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    for t in bypassed:
        if t.output[0] not in read and t in model.graph.node:
            model.graph.node.remove(t)
    return count


def gemm_as_matmul(model: onnx.ModelProto) -> int:
    """Rewrites in place each Gemm(A, W[, C]) with a constant W, transA 0, alpha and beta 1 (GPT-2's Conv1D, Linear
    layers exported by the TorchScript exporter) as MatMul(A, W or W^T) [+ Add C]: the quantizer takes MatMul only.
    Returns how many."""
    inits = {t.name: t for t in model.graph.initializer}
    nodes, count = [], 0
    for n in model.graph.node:
        att = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if (n.op_type != "Gemm" or n.domain not in ("", "ai.onnx") or n.input[1] not in inits or att.get("transA", 0)
                or att.get("alpha", 1.0) != 1.0 or att.get("beta", 1.0) != 1.0):
            nodes.append(n)
            continue
        w = n.input[1]
        if att.get("transB", 0):
            t = numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(inits[w]).T), w + "_t")
            model.graph.initializer.append(t)
            w = t.name
        has_bias = len(n.input) > 2 and n.input[2]
        product = n.output[0] + "_matmul" if has_bias else n.output[0]
        nodes.append(helper.make_node("MatMul", [n.input[0], w], [product], name=n.name + "_matmul"))
        if has_bias:
            nodes.append(helper.make_node("Add", [product, n.input[2]], [n.output[0]], name=n.name + "_bias"))
        count += 1
    if count:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return count


def measure(float_path: str, quantized_path: str, text_ids: list[int] | None = None) -> dict:
    from optim.ep_plugin import session

    props = {p.key: p.value for p in onnx.load(quantized_path, load_external_data=False).metadata_props}
    from optim.llm.info import METADATA_KEY

    if METADATA_KEY in props:
        from optim.llm.info import CausalLMInfo

        return _lm_accuracy(float_path, quantized_path, CausalLMInfo.from_json(props[METADATA_KEY]), text_ids)
    from optim.ep_plugin.inputs import random_inputs

    reference, quantized = session(float_path), session(quantized_path)
    # Dynamic dims (a batch, a sequence) at 1.
    shapes = {i.name: [d if isinstance(d, int) else 1 for d in i.shape] for i in reference.get_inputs()}
    try:
        feeds = random_inputs(reference, shapes, seed=0)
    except Exception as e:  # an input type random values cannot stand for
        return {"kind": "outputs", "outputs": [], "note": f"not measured on random inputs: {e}"}
    rows = []
    for out, r, g in zip(reference.get_outputs(), reference.run(None, feeds), quantized.run(None, feeds)):
        r64, g64 = r.astype(np.float64).ravel(), g.astype(np.float64).ravel()
        noise = float(np.sum((r64 - g64) ** 2))
        cosine = float(r64 @ g64 / (np.linalg.norm(r64) * np.linalg.norm(g64) + 1e-30))
        sqnr = 10 * np.log10(float(r64 @ r64) / noise) if noise > 0 else float("inf")
        rows.append({"output": out.name, "cosine": cosine, "sqnr_db": sqnr})
    return {"kind": "outputs", "outputs": rows}


def _lm_accuracy(float_path: str, quantized_path: str, info, text_ids: list[int] | None) -> dict:
    from optim.llm import CausalLM

    ids = list(text_ids) if text_ids else np.random.default_rng(0).integers(0, info.vocab, LM_REPORT_TOKENS).tolist()
    if len(ids) < 2:
        raise UserError("the accuracy text needs at least 2 tokens")
    logits = {}
    for name, path in (("float", float_path), ("quantized", quantized_path)):
        logits[name] = _all_logits(CausalLM(path), ids)
    f, q = logits["float"][:-1].astype(np.float64), logits["quantized"][:-1].astype(np.float64)
    cos = np.sum(f * q, -1) / (np.linalg.norm(f, axis=-1) * np.linalg.norm(q, axis=-1) + 1e-30)
    target = np.array(ids[1:])
    return {"kind": "causal_lm", "tokens": len(ids), "text": "given text" if text_ids else "seeded random ids",
            "cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()),
            "top1_agreement": float(np.mean(f.argmax(-1) == q.argmax(-1))),
            "ppl_float": _perplexity(f, target), "ppl_quantized": _perplexity(q, target)}


def _all_logits(model, ids: list[int]) -> np.ndarray:
    """Next-token logits at every position of `ids` [len, vocab], teacher-forced: the first half in one prefill, the
    rest one decode step per token, so both of the model's paths are measured (OptimEP's MatMulNBits runs a prefill
    on dequantized weights and decode rows on the codes, with int8 activations at accuracy_level 4)."""
    half = max(1, len(ids) // 2)
    batch, prefill = model.start([ids[:half]], every_position=True)
    rows = [prefill[0]]
    for token in ids[half:]:
        rows.append(model.step(batch, np.array([token], np.int64)))
    return np.concatenate(rows)


def _perplexity(logits: np.ndarray, target: np.ndarray) -> float:
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(np.exp(-logp[np.arange(len(target)), target].mean()))


def _op_counts(model: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def _weight_bytes(model: onnx.ModelProto) -> int:
    return sum(len(t.raw_data) if t.raw_data else numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def _quietly(fn) -> None:
    # onnxruntime.quantization logs a line per node at INFO through the root logger.
    root = logging.getLogger()
    level = root.level
    handlers = list(root.handlers)
    root.setLevel(logging.WARNING)
    try:
        fn()
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
