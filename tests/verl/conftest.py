"""One BC checkpoint per test session for the verl runs (slow tests): the smoke Sokoban config
with enough SFT that sampled replies have the format, so rewards, advantages and losses of a
smoke verl run are not all zero (budget=smoke's own 20 SFT steps stop at loss ~1.8: greedy
replies are format-valid, sampled ones mostly not).

Measured (1 thread, load ~1): 64 demos, 60 steps at lr 3e-3, batch 32 -> final loss 0.23,
greedy format-valid 8/8, the embedded smoke run's sampled format-valid ratio 0.96-0.99; 3 s of
SFT, ~7 s with the process start."""
from __future__ import annotations

import pytest

# the BC settings of the shared checkpoint (arena bc keys)
VERL_BC_ARGS = ["env=sokoban", "budget=smoke", "bc.demos=64", "bc.steps=60", "bc.lr=3e-3", "bc.batch_size=32",
                "wandb.enabled=false"]


@pytest.fixture(scope="session")
def verl_bc_checkpoint(tmp_path_factory) -> str:
    """The path of the shared BC checkpoint (pass it as model.path)."""
    import torch

    from arena.bc.train import ensure_bc_checkpoint
    from arena.config import load_config

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = tmp_path_factory.mktemp("verl_bc")
        cfg = load_config([*VERL_BC_ARGS, f"results_dir={results}"])
        path = ensure_bc_checkpoint(cfg, log=lambda *a: None)
    finally:
        torch.set_num_threads(before)
    return str(path)
