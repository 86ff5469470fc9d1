"""A run stopped on collapse ends on an eval of the policy it stops with (arena/backends/embedded/
trainer.py). With evals every 10 steps, Sokoban's default CISPO seed 2 collapsed at step 9 and its
summary's final eval was the step-0 eval: a gain of exactly 0 for a run whose format had fallen to
0.44 (docs/testbed.md, "The main job under regime B")."""
import arena.backends.embedded.trainer as trainer_mod
from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.runs import RunFolder

# sanity env, 4 steps, evals at steps 0, 2 and 4 (test_freq 2; the last-20% window is step 4 alone)
ARGS = ["env=sanity", "budget=sanity", "steps=4", "test_freq=2", "eval.n=16", "wandb.enabled=false"]


def _forced_collapse_at_step_1(history, total_steps, **_):
    return "forced at step 1" if any(r["step"] >= 1 for r in history) else None


def _run(tmp_path, monkeypatch, name: str, *extra: str) -> RunFolder:
    monkeypatch.setattr(trainer_mod, "collapse_reason", _forced_collapse_at_step_1)
    cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / name}", *extra])
    assert run_training(cfg, log=lambda *_: None) == 0
    return RunFolder(tmp_path / name)


def test_a_run_stopped_between_evals_ends_on_an_eval_of_its_last_policy(tmp_path, monkeypatch):
    run = _run(tmp_path, monkeypatch, "stops", "stability.stop_on_collapse=true")
    rows = run.read_metrics()
    # rows of steps 0 and 1 only (stopped after step 1); step 1 is not on the schedule (0, 2, 4),
    # so its eval is the one the stop adds, and the summary's final eval is that one
    assert [r["step"] for r in rows] == [0, 1]
    assert "eval/success_rate" in rows[0] and "eval/success_rate" in rows[1]
    summary = run.summary()
    assert (summary["status"], summary["steps"]) == ("collapsed", 1)
    assert summary["final_eval_success"] == rows[1]["eval/success_rate"]
    assert summary["initial_eval_success"] == rows[0]["eval/success_rate"]
    wins = run.read_eval_wins(1)  # the paired gain SE pairs the step-0 and step-1 evals
    assert wins is not None and len(wins) == 16 and sum(wins) / 16 == rows[1]["eval/success_rate"]


def test_a_run_that_does_not_stop_keeps_its_eval_schedule(tmp_path, monkeypatch):
    run = _run(tmp_path, monkeypatch, "goes_on", "stability.stop_on_collapse=false")
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["step"] for r in rows if "eval/success_rate" in r] == [0, 2, 4]
    assert run.summary()["status"] == "collapsed" and run.read_eval_wins(1) is None
