"""The lint of a pretrained LLM's run (docs/verl.md, The real-model recipe): a `model.path` that
names a pretrained LLM with the toy testbed's settings exits 2 before anything starts.

The testbed's values are made for a 0.17M-parameter model with a word-level tokenizer: 8-32 new
tokens a turn ("<think>plan</think><action>down</action>" is 6 word-level tokens, 15+ BPE tokens
before any reasoning), lr 1e-4 (verl's and the authors' GRPO recipes use 1e-6 for 1.5B-7B
models), and the "minimal" prompt (for a model trained from scratch; a pretrained LLM reads the
authors' wording, "full"). Such a run trains, logs and spends GPU hours, and learns nothing or
collapses, with no error; the lint is an error, not a warning, for that reason. Each rule names
the recipe (`model=qwen2.5-1.5b`, `model=qwen2.5-7b`) and the key to set.

Pretrained: `model.path` is set and is either a hub id, `<org>/<name>`, that is not a local
folder (the run itself refuses it, arena downloads nothing; `--dry-run` and `arena verl-config`
show its config), or an
HF folder whose config.json has `hidden_size` >= PRETRAINED_HIDDEN (arena's own models, the
BC checkpoints and run folders, are at most 256 wide: arena.lm.model.SIZES).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from arena.runs.policy import NoPolicy, policy_folder

PRETRAINED_HIDDEN = 512  # wider than arena's largest size (medium, 256); Qwen2.5-0.5B is 896
MIN_NEW_TOKENS = 64  # env.max_new_tokens floor for a pretrained LLM (recipe: 512)
MAX_LR = 1e-5  # lr must be below this (recipe: 1e-6)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # <org>/<name>, as the Hugging Face hub names models
RECIPES = "model=qwen2.5-1.5b or model=qwen2.5-7b (configs/model/, docs/verl.md)"


def is_pretrained(cfg) -> bool:
    """`model.path` names a pretrained LLM (module docstring)."""
    if not cfg.model.path:
        return False
    path = Path(str(cfg.model.path)).expanduser()
    if not path.is_dir():  # a hub id ("Qwen/Qwen2.5-7B-Instruct") names a pretrained LLM; another path, nothing known
        return HUB_ID.fullmatch(str(cfg.model.path)) is not None

    try:
        config = policy_folder(path) / "config.json"
        hidden = json.loads(config.read_text()).get("hidden_size", 0) if config.is_file() else 0
    except (NoPolicy, OSError, ValueError):
        return False
    return int(hidden or 0) >= PRETRAINED_HIDDEN


def toy_settings(cfg) -> list[str]:
    """The run's settings that are the toy testbed's, each with the recipe's value."""
    found = []
    if int(cfg.env.max_new_tokens) < MIN_NEW_TOKENS:
        found.append(f"env.max_new_tokens={cfg.env.max_new_tokens} (< {MIN_NEW_TOKENS}; the recipe: 512)")
    if float(cfg.lr) >= MAX_LR:
        found.append(f"lr={cfg.lr:g} (>= {MAX_LR:g}; the recipe: 1e-6)")
    if str(cfg.model.prompt_template) != "full":
        found.append(f"model.prompt_template={cfg.model.prompt_template} (for a model trained from scratch; "
                     "the recipe: full)")
    return found


def lint(cfg) -> None:
    """ValueError (exit 2) when a pretrained `model.path` runs with toy settings."""
    if not is_pretrained(cfg):
        return
    found = toy_settings(cfg)
    if found:
        raise ValueError(f"model.path={cfg.model.path} is a pretrained LLM, but the run keeps the toy testbed's "
                         f"settings: {'; '.join(found)}; valid: {RECIPES}, or set those keys yourself")
