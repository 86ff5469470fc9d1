"""At budget=smoke a run's "collapsed" lines say that the flag is expected there and means
nothing (a few steps on a tiny batch); at any other budget they stay as they are."""
import arena.backends.embedded.trainer as trainer_mod
from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.runs.stability import SMOKE_NOTE, smoke_note


def _collapse_lines(tmp_path, monkeypatch, budget: str) -> list[str]:
    # the collapse rule forced to fire from step 1 (as the smoke run's format rule does)
    monkeypatch.setattr(trainer_mod, "collapse_reason", lambda history, total_steps, **_:
                        "forced at step 1" if any(r["step"] >= 1 for r in history) else None)
    cfg = load_config(["env=sanity", f"budget={budget}", "steps=2", "eval.n=8", "wandb.enabled=false",
                       "stability.stop_on_collapse=false", f"results_dir={tmp_path}", f"out={tmp_path / budget}"])
    logs: list[str] = []
    assert run_training(cfg, log=logs.append) == 0
    return [line for line in logs if "collapsed" in line]


def test_smoke_collapse_lines_say_it_is_expected(tmp_path, monkeypatch):
    smoke = _collapse_lines(tmp_path, monkeypatch, "smoke")
    assert len(smoke) == 2 and all(line.endswith(SMOKE_NOTE) for line in smoke), smoke  # mid-run and the final line
    other = _collapse_lines(tmp_path, monkeypatch, "sanity")
    assert len(other) == 2 and not any(SMOKE_NOTE in line for line in other), other
    assert smoke_note("smoke", "done") == "" and smoke_note("smoke", "no_format") == SMOKE_NOTE
