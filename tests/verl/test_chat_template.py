"""Training prompts are encoded as `arena eval` encodes them: with the tokenizer's chat template
when it has one (a pretrained LLM), as raw text when it has none (arena's own tokenizers)."""
import pytest

pytest.importorskip("verl")

from arena.backends.verl.agent_loop import encode_prompt  # noqa: E402
from arena.evaluation.local_model import LocalModel  # noqa: E402

from .real_tokenizer import build_real_tokenizer  # noqa: E402

TEMPLATE = "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<|bot|>{% endif %}"


class _Eval:  # LocalModel.encode reads only self.tokenizer
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer


def test_training_and_eval_encode_a_turn_alike(tmp_path):
    tok = build_real_tokenizer(tmp_path / "tok")
    prompt = "the player pushes the box"
    raw = tok.encode(prompt, add_special_tokens=False)
    assert encode_prompt(tok, prompt) == raw == LocalModel.encode(_Eval(tok), [{"role": "user", "content": prompt}])
    tok.chat_template = TEMPLATE
    # "<|user|>" + prompt + "<|bot|>" by the template above: the raw ids sit inside, with more around
    templated = tok.encode("<|user|>" + prompt + "<|bot|>", add_special_tokens=False)
    assert encode_prompt(tok, prompt) == templated == LocalModel.encode(_Eval(tok), [{"role": "user", "content": prompt}])
    assert len(templated) > len(raw)
