"""Chat messages to one prompt: the model's own chat template where its folder has one, else a plain format.

A Hugging Face model folder's tokenizer_config.json carries the template its model was tuned with (a Jinja text,
or a list of named ones: "default" is used), and `optim export` copies that file beside the ONNX model. It is
rendered as transformers renders it: with `messages`, `add_generation_prompt=True`, the bos / eos token texts,
`raise_exception`, `strftime_now`, a `tojson` that does not escape HTML and loop controls, in Jinja's sandbox (a
template is data from the model folder, not code to trust). The special token texts it writes ("<|im_start|>",
"<s>") become their ids when the tokenizer encodes the prompt.
Without a template: "<|role|>\\ncontent\\n" per message, then "<|assistant|>\\n".
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from optim.common.errors import UserError

TOKENIZER_CONFIG = "tokenizer_config.json"


def _check(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise UserError("messages must be a non-empty list of {role, content}")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or not isinstance(m.get("role"), str):
            raise UserError("each message needs a string role and a string content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def plain_prompt(messages) -> str:
    """The prompt of a model without a chat template."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in _check(messages)) + "<|assistant|>\n"


class ChatTemplate:
    """A model's chat template (`source`, Jinja) with its bos / eos token texts; render(messages) -> the prompt."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", origin: str = "the template"):
        try:
            from jinja2 import TemplateError
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError as e:
            raise UserError(f"the chat template of {origin} needs jinja2: pip install 'optim[llm]' ({e})") from None

        def raise_exception(message):
            raise UserError(f"the chat template of {origin} refused the messages: {message}")

        def tojson(value, indent=None, separators=None, sort_keys=False):  # as transformers': no HTML escaping
            return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(source)
        except TemplateError as e:
            raise UserError(f"the chat template of {origin} is not valid Jinja: {e}") from None
        self.bos_token, self.eos_token, self.origin = bos_token, eos_token, origin
        self._error = TemplateError

    def render(self, messages) -> str:
        try:
            return self._template.render(messages=_check(messages), add_generation_prompt=True,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except self._error as e:
            raise UserError(f"the chat template of {self.origin} failed on these messages: {e}") from None


def _token_text(value) -> str:
    """A tokenizer_config.json special token: a string, or an AddedToken's {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def load_chat_template(model: str | os.PathLike) -> ChatTemplate | None:
    """The chat template in the tokenizer_config.json beside model file `model`; None when there is none."""
    path = Path(model).parent / TOKENIZER_CONFIG
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is not readable JSON ({e})") from None
    source = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(source, list):  # named templates: the default one
        source = next((t.get("template") for t in source if isinstance(t, dict) and t.get("name") == "default"), None)
    if not isinstance(source, str) or not source.strip():
        return None
    return ChatTemplate(source, _token_text(config.get("bos_token")), _token_text(config.get("eos_token")), str(path))


def chat_prompt(messages, template: ChatTemplate | None = None) -> str:
    """The prompt for `messages` ([{role, content}]): through `template`, or plain_prompt's format without one."""
    return template.render(messages) if template is not None else plain_prompt(messages)
