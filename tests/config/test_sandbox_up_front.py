"""An environment that runs tool code (tir_math) whose sandbox mode cannot run on this machine
stops `arena train`, `arena bc` and `arena sweep` with exit 2 and the sandbox's own message
before anything is written, instead of failing at the first tool call (during BC demos, exit 1).

The machine without namespaces is simulated as tests/envs/test_sandbox_findings.py does:
`sandbox.UNSHARE = None` (no `unshare`), a fresh plan cache, and a non-root user (euid 1000),
for whom mode auto then has no allowed setup (plain must be asked for explicitly)."""
import os

import pytest

from arena.cli import main
from arena.envs import sandbox

REFUSAL = "env.kwargs.sandbox_mode=plain"  # the way out the sandbox's refusal names


@pytest.fixture
def no_namespaces(monkeypatch):
    monkeypatch.setattr(sandbox, "UNSHARE", None)
    monkeypatch.setattr(sandbox, "_PLANS", {})
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    # any probe would be a bug: with no candidate setup nothing may even be tried
    monkeypatch.setattr(sandbox, "_execute", lambda *a, **k: pytest.fail("a sandbox probe ran"))


@pytest.mark.parametrize("verb", ["train", "bc"])
def test_train_and_bc_exit_2_before_any_work(verb, no_namespaces, tmp_path, capsys):
    args = [verb, "env=tir_math", "budget=smoke", f"results_dir={tmp_path}", f"out={tmp_path / 'run'}",
            "wandb.enabled=false"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena {verb}: sandbox: tool code cannot be isolated") and REFUSAL in err
    assert list(tmp_path.iterdir()) == []  # no run folder, no BC folder


def test_sweep_exits_2_before_writing_the_sweep(no_namespaces, tmp_path, capsys):
    args = ["sweep", "dimension=advantage", "env=tir_math", "seeds=1", "budget=smoke", "launcher=debug",
            f"results_dir={tmp_path}", "wandb.enabled=false"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("arena sweep: ") and REFUSAL in err
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_mode_that_cannot_run_names_the_valid_modes(monkeypatch, tmp_path, capsys):
    # as root too: sandbox_mode=namespaces without unshare has no setup to try
    monkeypatch.setattr(sandbox, "UNSHARE", None)
    monkeypatch.setattr(sandbox, "_PLANS", {})
    assert main(["train", "env=tir_math", "env.kwargs.sandbox_mode=namespaces", f"out={tmp_path / 'run'}",
                 "wandb.enabled=false"]) == 2
    assert "no working setup for sandbox_mode='namespaces'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_envs_without_tool_code_are_not_probed(no_namespaces, tmp_path):
    from arena.backends import check_trainable
    from arena.config import load_config

    check_trainable(load_config(["env=sokoban"]))  # no sandbox: passes even here
