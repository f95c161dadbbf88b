"""Chat messages to a prompt (optim.llm.chat): a model folder's own template rendered as transformers renders it
(sandboxed), the default of named templates, special tokens given as AddedToken dicts, and clear errors."""

from __future__ import annotations

import json

import pytest

from optim.common.errors import UserError
from optim.llm.chat import TOKENIZER_CONFIG, ChatTemplate, chat_prompt, load_chat_template, plain_prompt

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
RENDERED = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def _folder(tmp_path, config) -> str:
    (tmp_path / TOKENIZER_CONFIG).write_text(json.dumps(config))
    return str(tmp_path / "model.onnx")


def test_the_folders_template_renders_the_messages_with_the_generation_prompt(tmp_path):
    template = load_chat_template(_folder(tmp_path, {"chat_template": CHATML}))
    assert chat_prompt(MESSAGES, template) == RENDERED


def test_named_templates_use_the_default_and_special_tokens_may_be_added_token_dicts(tmp_path):
    config = {"chat_template": [{"name": "tool_use", "template": "tools"},
                                {"name": "default", "template": "{{ bos_token }}{{ messages[-1]['content'] }}{{ eos_token }}"}],
              "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>"}
    assert chat_prompt(MESSAGES, load_chat_template(_folder(tmp_path, config))) == "<s>Hi</s>"


def test_without_a_template_the_plain_format_is_used(tmp_path):
    assert load_chat_template(str(tmp_path / "model.onnx")) is None
    assert load_chat_template(_folder(tmp_path, {"bos_token": "<s>"})) is None
    assert chat_prompt(MESSAGES) == plain_prompt(MESSAGES) == "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"


def test_errors_name_what_is_wrong(tmp_path):
    refusing = ChatTemplate("{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}")
    with pytest.raises(UserError, match="refused the messages: first must be user"):
        refusing.render(MESSAGES)
    with pytest.raises(UserError, match="not valid Jinja"):
        ChatTemplate("{% for %}")
    with pytest.raises(UserError, match="failed on these messages"):  # the sandbox stops a template reaching Python
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render(MESSAGES)
    with pytest.raises(UserError, match="each message needs a string role"):
        chat_prompt([{"role": "user"}])
    with pytest.raises(UserError, match="non-empty list"):
        chat_prompt([])
    (tmp_path / TOKENIZER_CONFIG).write_text("{not json")
    with pytest.raises(UserError, match="not readable JSON"):
        load_chat_template(str(tmp_path / "model.onnx"))


def test_what_real_templates_use_works_as_in_transformers():
    """Loop controls, strftime_now (Llama 3's date line) and tojson without HTML escaping (tool schemas)."""
    source = ("{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m['content'] | tojson }}"
              "{% endfor %}|{{ strftime_now('%Y') | length }}|{{ {'a': '<b>'} | tojson }}")
    assert ChatTemplate(source).render(MESSAGES) == '"Be brief."|4|{"a": "<b>"}'
