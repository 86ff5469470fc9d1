"""The tool sandbox mode in force is printed once at the start of training and recorded in
the run's config.yaml, summary.json and W&B config (docs/sandbox.md, Modes). A tiny
embedded run (random init, 1 step, 2 demos) with a stand-in W&B run; slow suite (the model
set-up alone takes over 5 s). The fast suite checks `env_isolation` itself
(tests/envs/test_sandbox_findings.py)."""
from __future__ import annotations

import json

import pytest
import yaml

import arena.backends.embedded.run as run_module
from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.envs import sandbox

TINY = ["budget=sanity", "steps=1", "save_freq=1", "test_freq=1", "eval.n=2", "batch_envs=1",
        "group_size=2", "bc.demos=2", "bc.eval_n=2", "wandb.enabled=true"]


class StandInWandb:
    """What the trainer calls on a W&B run: config.update, log, finish."""

    def __init__(self):
        self.config_updates: dict = {}
        self.config = self

    def update(self, values: dict, allow_val_change: bool = False) -> None:
        self.config_updates.update(values)

    def log(self, row: dict, step: int) -> None:
        pass

    def finish(self) -> None:
        pass


def train_tiny(tmp_path, monkeypatch, env: str) -> tuple[dict, dict, StandInWandb, list[str]]:
    wandb_run, logs = StandInWandb(), []
    monkeypatch.setattr(run_module, "init_wandb", lambda *args, **kwargs: wandb_run)
    cfg = load_config([f"env={env}", *TINY, f"results_dir={tmp_path}", f"out={tmp_path / 'run'}"])
    assert run_training(cfg, log=logs.append) == 0, logs
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return config, summary, wandb_run, logs


@pytest.mark.slow  # wall-time budget 60 s on 2 busy cores (measured 8-14 s: BC set-up of tir_math)
def test_tool_env_records_the_mode_in_force(tmp_path, monkeypatch):
    config, summary, wandb_run, logs = train_tiny(tmp_path, monkeypatch, "tir_math")
    mode = sandbox.mode_in_force("auto")  # tir_math's default sandbox_mode
    assert config["tool_sandbox"] == summary["tool_sandbox"] == mode
    assert wandb_run.config_updates == {"tool_sandbox": mode}
    assert [line for line in logs if "tool sandbox" in line] == [f"[train] tool sandbox: {mode}"]


@pytest.mark.slow  # wall-time budget 40 s on 2 busy cores (measured 7 s: model set-up)
def test_env_without_tools_records_none(tmp_path, monkeypatch):
    config, summary, wandb_run, logs = train_tiny(tmp_path, monkeypatch, "sanity")
    assert config["tool_sandbox"] is None and summary["tool_sandbox"] is None
    assert wandb_run.config_updates == {"tool_sandbox": None}
    assert sum("tool sandbox: none" in line for line in logs) == 1
