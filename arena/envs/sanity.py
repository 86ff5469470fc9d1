"""The RL sanity environment: one turn, and the observation
determines the right action. Any correct policy gradient solves it quickly from a random
initialisation; a pipeline with a wrong gradient sign or broken bookkeeping does not.

    reset(seed) -> "cue C" with i = a seed-derived index, C = CUES[i]
    step(a)     -> reward 1 and won iff a (stripped, lower-cased) == WORDS[i]; always done

The cue is a different token from the answer on purpose: a freshly initialised model with tied
embeddings tends to repeat its last input token, so "say left" -> "left" would be solved by
that bias alone, at step 0, without any learning.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Tuple

from .spec import EnvSpec

WORDS = ("left", "right", "up", "down")
CUES = ("a", "b", "c", "d")


@dataclass(frozen=True)
class SanityKwargs:
    """env.kwargs of sanity (arena.envs.spec): the one place for their defaults."""
    words: Tuple[str, ...] = WORDS  # 2 to len(CUES) answer words


class SanityEnv:
    name = "sanity"
    max_turns = 1
    instruction = "Reply with the word named in the observation."

    def __init__(self, **kwargs):
        words = SanityKwargs(**kwargs).words  # the defaults: SanityKwargs
        if not 2 <= len(words) <= len(CUES):
            raise ValueError(f"need 2 to {len(CUES)} words, got {list(words)}")
        self.words = tuple(words)
        self._target: Optional[str] = None

    def reset(self, seed: int) -> tuple[str, dict]:
        i = random.Random(seed).randrange(len(self.words))
        self._target = self.words[i]
        return f"cue {CUES[i % len(CUES)]}", {"won": False, "admissible_actions": list(self.words)}

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        if self._target is None:
            raise RuntimeError("call reset() before step()")
        won = str(action).strip().lower() == self._target
        self._target = None
        return "done", 1.0 if won else 0.0, True, {"won": won, "admissible_actions": list(self.words)}

    def is_admissible(self, action: str) -> bool:
        return str(action).strip().lower() in self.words

    def expert_action(self) -> Optional[str]:
        return self._target


SPEC = EnvSpec(name="sanity", kwargs=SanityKwargs, factory=SanityEnv)
