"""Generating text with a causal LM exported by `optim export` (its KV cache in the graph), on OptimEP.

    from optim.llm import CausalLM, Sampling, generate, load_tokenizer
    model = CausalLM("llama.onnx")
    tok = load_tokenizer("llama.onnx", model.info.vocab)
    rows, stats = generate(model, [tok.encode("Once upon a time")], max_new_tokens=32, decode=tok.decode)
    print(rows[0].text, stats.summary())

Needs onnxruntime and numpy only (and `tokenizers` for a tokenizer.json); no torch.
"""

from .generate import Generation, GenerationStats, generate
from .info import CausalLMInfo, read_info
from .model import CausalLM
from .sampling import Sampling
from .tokenizer import ByteTokenizer, load_tokenizer

__all__ = ["ByteTokenizer", "CausalLM", "CausalLMInfo", "Generation", "GenerationStats", "Sampling", "generate",
           "load_tokenizer", "read_info"]
