"""The cache key of a BC checkpoint (docs/design.md, Run folder): every config input the
checkpoint and its report depend on, and nothing else. Torch-free, so the sweep driver can
group cells by BC checkpoint without importing the backend.

Inputs: the environment (rooms, prompt history, reply length limit; not `po_defaults`, which
only RL reads), the model and tokenizer, every `bc.*` key (demos, steps or band, lr, ...),
`seed` (it orders the SFT mini-batches and seeds the T=1 rejection rollouts), the eval
temperature/top_p (the report's success) and `device` (CPU and CUDA kernels differ in the
last bits). The torch thread count is not in the key: with `bc.band` set, BC stops in the
band whatever the kernels' rounding (docs/testbed.md, BC band). A `bc.*` key added after
checkpoints existed (`bc.pad_per_batch`, `bc.group_by_length`) enters the key only off its default, so that those
checkpoints keep their keys (arena.config.load.HASHED_OFF_DEFAULT).
"""
from __future__ import annotations

import hashlib
import json

from arena.config import to_plain, without_hashed_defaults


def bc_key(cfg) -> dict:
    env = {k: v for k, v in to_plain(cfg.env).items() if k != "po_defaults"}
    return without_hashed_defaults({
        "env": env,
        "model": to_plain(cfg.model),
        "bc": to_plain(cfg.bc),
        "seed": int(cfg.seed),
        "eval": {"temperature": cfg.eval.temperature, "top_p": cfg.eval.top_p},
        "device": str(cfg.device),
    })


def bc_hash(cfg) -> str:
    return hashlib.sha256(json.dumps(bc_key(cfg), sort_keys=True, default=str).encode()).hexdigest()[:16]
