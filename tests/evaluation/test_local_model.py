"""The prompt encoding shared by `policy=checkpoint` and `arena serve`."""
from __future__ import annotations

from arena.evaluation.local_model import LocalModel


def test_encode_raw_prompt_or_chat_template(bc_checkpoint):
    local = LocalModel(bc_checkpoint)
    prompt = "Board:\n#P_#\nYou have already taken 1 step(s)."
    # an arena checkpoint has no chat template: one user message is exactly the training prompt
    assert local.encode([{"role": "user", "content": prompt}]) == local.tokenizer.encode(prompt, add_special_tokens=False)
    # several messages: their contents joined by a blank line
    two = [{"role": "system", "content": "Board:"}, {"role": "user", "content": "up"}]
    assert local.encode(two) == local.tokenizer.encode("Board:\n\nup", add_special_tokens=False)
    # a tokenizer with a chat template gets it, as a list of ids (transformers 5 returns a BatchEncoding)
    local.tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}{% if add_generation_prompt %}Action{% endif %}"
    ids = local.encode([{"role": "user", "content": "Board: up"}])
    assert ids == local.tokenizer.encode("Board: up Action", add_special_tokens=False)
    assert local.stop_ids[0] == local.tokenizer.convert_tokens_to_ids("</action>")
