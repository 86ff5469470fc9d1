"""Shared fixtures: one tiny BC checkpoint per test session (the existing BC code on one
thread, ~4 s unloaded), an `arena serve` of it on 127.0.0.1, and a fake API key."""
from __future__ import annotations

import pytest
import torch

from .servers import running_server

# 3x3-interior Sokoban, short episodes: BC on 64 expert episodes wins some and loses some,
# so outcome comparisons below check both kinds.
ENV_ARGS = ["env=sokoban", "env.kwargs.dim=5", "env.kwargs.max_turns=8"]
FAKE_KEY = "sk-arena-FAKE-4f1c9a7e2b6d"


@pytest.fixture(scope="session")
def bc_checkpoint(tmp_path_factory) -> str:
    from arena.bc.train import ensure_bc_checkpoint
    from arena.config import load_config

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    results = tmp_path_factory.mktemp("bc_results")
    cfg = load_config([*ENV_ARGS, "budget=smoke", f"results_dir={results}", "bc.demos=64", "bc.steps=60", "bc.lr=3e-3",
                       "bc.batch_size=32", "bc.eval_n=8", "wandb.enabled=false"])
    path = ensure_bc_checkpoint(cfg, log=lambda *a: None)
    torch.set_num_threads(before)
    return str(path)


@pytest.fixture(scope="session")
def served_checkpoint(bc_checkpoint):
    """`arena serve`'s app on the BC checkpoint, on 127.0.0.1 (an ephemeral port): base_url."""
    from arena.evaluation.local_model import LocalModel
    from arena.evaluation.server import build_app

    app = build_app(LocalModel(bc_checkpoint), "bc-tiny")
    with running_server(app) as base_url:
        yield base_url


@pytest.fixture
def fake_key(monkeypatch) -> str:
    monkeypatch.setenv("ARENA_TEST_KEY", FAKE_KEY)
    return FAKE_KEY
