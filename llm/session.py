"""`optim generate` as a function: a request (model, prompts as text or ids, sampling, stop strings, runtime
options) -> the generated rows and the timing summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from optim.common.errors import UserError

from .generate import Generation, GenerationStats, generate
from .model import CausalLM
from .sampling import Sampling
from .tokenizer import load_tokenizer


@dataclass
class GenerateRequest:
    """prompts: texts (need a tokenizer); prompt_ids: "1,2,3" strings; eos False: go on past end ids."""

    model: str
    prompts: list[str]
    prompt_ids: list[str]
    max_new_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    stop: list[str] | None = None
    eos: bool = True
    tokenizer: str | None = None
    runtime: str = "optim"
    threads: int | None = None
    isa: str | None = None
    precision: str | None = None


@dataclass
class GenerateResult:
    rows: list[Generation]
    stats: GenerationStats
    placement: str  # OptimEP's placement summary line ("" on the CPU EP alone)

    def to_dict(self) -> dict:
        stats = asdict(self.stats)
        stats.update(prefill_tokens_per_s=self.stats.prefill_tokens_per_s,
                     decode_tokens_per_s=self.stats.decode_tokens_per_s)
        return {"rows": [asdict(r) for r in self.rows], "stats": stats, "placement": self.placement}


def parse_ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise UserError(f"--prompt-ids {text!r} is not comma-separated integers, e.g. 1,15043,29892") from None
    if not ids:
        raise UserError("--prompt-ids needs at least one token id")
    return ids


def run_generate(request: GenerateRequest, on_text: Callable[[int, str], None] | None = None) -> GenerateResult:
    if not request.prompts and not request.prompt_ids:
        raise UserError("give a prompt: --prompt TEXT or --prompt-ids 1,2,3")
    model = CausalLM(request.model, runtime=request.runtime, threads=request.threads, isa=request.isa,
                     precision=request.precision)
    tokenizer = None
    if request.prompts or request.stop or on_text or request.tokenizer:
        tokenizer = load_tokenizer(request.model, model.info.vocab, request.tokenizer)
    prompts = [tokenizer.encode(p) for p in request.prompts] + [parse_ids(t) for t in request.prompt_ids]
    sampling = Sampling(request.temperature, request.top_k, request.top_p, request.seed)
    rows, stats = generate(model, prompts, max_new_tokens=request.max_new_tokens, sampling=sampling,
                           decode=tokenizer.decode if tokenizer else None, stop=request.stop, eos=request.eos,
                           on_text=on_text)
    placement = ""
    if request.runtime == "optim":
        from optim.ep_plugin import placement as placement_of

        placement = placement_of(model.session).summary().splitlines()[0]
    return GenerateResult(rows, stats, placement)
