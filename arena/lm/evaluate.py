"""Evaluation on held-out seeds (docs/design.md §E): `eval.n` episodes on eval_seed(0..n-1),
one trajectory per seed, at `eval.temperature` (0 = greedy)."""
from __future__ import annotations

import json

import torch

from arena.agent.rollout import rollout
from arena.config import to_plain
from arena.envs import eval_seed, make

from .sampler import make_policy

_ENV_CACHE: dict = {}


def _eval_envs(name: str, kwargs: dict, n: int) -> list:
    key = (name, json.dumps(kwargs, sort_keys=True))
    envs = _ENV_CACHE.setdefault(key, [])
    while len(envs) < n:
        envs.append(make(name, **kwargs))
    return envs[:n]


@torch.inference_mode()
def evaluate(model, tokenizer, cfg, *, n: int | None = None, temperature: float | None = None,
             seeds: list[int] | None = None) -> dict:
    """`seeds` replaces the held-out eval_seed(0..n-1) (BC's validation rooms)."""
    n = cfg.eval.n if n is None else n
    seeds = [eval_seed(i) for i in range(n)] if seeds is None else list(seeds)
    n = len(seeds)
    temperature = cfg.eval.temperature if temperature is None else temperature
    model.eval()
    policy = make_policy(model, tokenizer, temperature=temperature, top_p=cfg.eval.top_p,
                         max_new_tokens=cfg.env.max_new_tokens, seed=cfg.seed)
    envs = _eval_envs(cfg.env.name, to_plain(cfg.env.kwargs), n)
    batch, stats = rollout(envs, seeds, 1, policy,
                           penalty_coef=cfg.env.penalty_coef, history_length=cfg.env.history_length,
                           pad_id=tokenizer.pad_token_id, template=cfg.model.prompt_template)
    wins = [0] * n  # wins[i]: episode i (seeds[i]) was won; one trajectory per seed, group_id = i
    for group, won in zip(batch.group_id.tolist(), batch.won.tolist()):
        wins[group] = max(wins[group], int(won))
    return {
        "success_rate": stats["success_rate"],
        "wins": wins,
        "format_valid_ratio": float(batch.format_valid.float().mean()) if len(batch) else 0.0,
        "n": n,
    }
