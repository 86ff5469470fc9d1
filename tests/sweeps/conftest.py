import pytest


@pytest.fixture
def sweep_env(tmp_path, monkeypatch):
    """A results dir in tmp and fast heartbeats; returns common CLI args."""
    monkeypatch.setenv("ARENA_HEARTBEAT_S", "0.5")
    monkeypatch.delenv("FAKE_SLEEP", raising=False)
    monkeypatch.delenv("FAKE_FAIL_ARMS", raising=False)
    monkeypatch.delenv("FAKE_UNSTABLE_EPS", raising=False)
    return [f"results_dir={tmp_path}", "budget=smoke", "wandb.enabled=false"]
