"""A local checkpoint as a text policy, shared by `arena eval policy=checkpoint` and `arena serve`
(docs/eval.md, Checkpoints), so that both turn the same prompt into the same tokens.

Prompt text -> ids: a tokenizer with a chat template (a local HF instruct model) gets the
template with the generation prompt; a tokenizer without one (every arena checkpoint, whose
training prompts are raw text) gets the messages' contents joined by a blank line, so a single
user message is exactly the prompt the training rollout encodes. Decoding is the embedded
sampler's (`sample_tokens`): it stops at `</action>` (kept in the text, as in training) when
the tokenizer has it as one token, and at eos.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

import torch

from arena.lm.model import load_model
from arena.lm.sampler import sample_tokens
from arena.lm.tokenizer import chat_ids, tag_id


class LocalModel:
    def __init__(self, path: str, *, device: str = "cpu"):
        self.path = path
        self.model, self.tokenizer = load_model(path, device=device)
        self.model.eval()
        self.stop_ids = self._stop_ids()
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        self.pad_id = pad or 0
        self.lock = threading.Lock()  # one generation at a time (the server's worker threads)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)  # 0: unknown

    def _stop_ids(self) -> list[int]:
        stops = []
        try:
            stops.append(tag_id(self.tokenizer, "</action>"))
        except ValueError:  # a tokenizer that splits the tag (e.g. a pretrained BPE): eos only
            pass
        if self.tokenizer.eos_token_id is not None:
            stops.append(self.tokenizer.eos_token_id)
        return stops

    def encode(self, messages: Sequence[dict]) -> list[int]:
        """Chat messages -> prompt ids (module docstring)."""
        if getattr(self.tokenizer, "chat_template", None):
            return chat_ids(self.tokenizer, messages)
        text = "\n\n".join(str(m.get("content") or "") for m in messages)
        return self.tokenizer.encode(text, add_special_tokens=False)

    @torch.no_grad()
    def complete(self, prompt_ids: Sequence[Sequence[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 generator: Optional[torch.Generator] = None, should_stop: Optional[Callable[[], bool]] = None,
                 lock_timeout: float = -1) -> list[tuple[str, list[int], list[float], str]]:
        """Per prompt: (text, token ids, sampler log-probs, finish_reason "stop" | "length").
        `should_stop` is asked before every token (sample_tokens: DecodeStopped); TimeoutError
        when the model stays busy for `lock_timeout` seconds (-1: wait for ever)."""
        if not self.lock.acquire(timeout=lock_timeout):
            raise TimeoutError(f"the model stayed busy with other requests for {lock_timeout:.1f} s")
        try:
            outputs = sample_tokens(self.model, prompt_ids, temperature=temperature, top_p=top_p,
                                    max_new_tokens=max_new_tokens, stop_token_ids=self.stop_ids,
                                    pad_token_id=self.pad_id, generator=generator, should_stop=should_stop)
        finally:
            self.lock.release()
        results = []
        for tokens, logp in outputs:
            stopped = bool(tokens) and tokens[-1] in self.stop_ids
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            results.append((text, tokens, logp, "stop" if stopped or len(tokens) < max_new_tokens else "length"))
        return results

    def policy(self, *, temperature: float, top_p: float, max_new_tokens: int, seed: Optional[int]):
        """The rollout loop's `generate(prompts) -> [(text, prompt_ids, token_ids, sampler_logp)]`,
        one user message per prompt (docs/design.md, Per-turn batch)."""
        generator = torch.Generator(device=next(self.model.parameters()).device)
        if seed is not None:
            generator.manual_seed(seed)

        def generate(prompts: list) -> list:
            ids = [self.encode([{"role": "user", "content": p}]) for p in prompts]
            outs = self.complete(ids, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                 generator=generator)
            return [(text, p, tokens, logp) for p, (text, tokens, logp, _) in zip(ids, outs)]

        return generate
