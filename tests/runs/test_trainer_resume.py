"""The embedded trainer's metrics on a rerun (docs/design.md, Run folder). Killed before its
first checkpoint, a run restarts from step 0; its old rows must go, not be appended to
(0,1,0,1,2,... made the summary count eval points twice). Killed after a checkpoint, the rows
after it go. Both reruns must equal the uninterrupted run row for row (timings aside)."""
import arena.backends.embedded.trainer as trainer_mod
from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.runs import RunFolder

# sanity env, 4 steps, checkpoints at steps 2 and 4, eval at 0, 2, 4 (and the last-20% window: 4)
ARGS = ["env=sanity", "budget=sanity", "steps=4", "save_freq=2", "test_freq=2", "eval.n=16", "wandb.enabled=false"]


def _rows(run):
    return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in run.read_metrics()]


def _run_killed_at_update(tmp_path, monkeypatch, name: str, kill_at: int) -> RunFolder:
    cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / name}"])
    real_update, calls = trainer_mod.ppo_update, {"n": 0}

    def dying_update(*a, **k):
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise RuntimeError("simulated kill")
        return real_update(*a, **k)

    monkeypatch.setattr(trainer_mod, "ppo_update", dying_update)
    assert run_training(cfg, log=lambda *_: None) == 1
    monkeypatch.setattr(trainer_mod, "ppo_update", real_update)
    logs = []
    assert run_training(cfg, log=logs.append) == 0
    run = RunFolder(tmp_path / name)
    run.logs = logs
    return run


def test_rerun_before_and_after_the_first_checkpoint_matches_the_uninterrupted_run(tmp_path, monkeypatch):
    ref_cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / 'ref'}"])
    assert run_training(ref_cfg, log=lambda *_: None) == 0
    ref = RunFolder(tmp_path / "ref")
    # killed in step 2's update: rows 0, 1 written, no checkpoint yet (the first is at step 2)
    early = _run_killed_at_update(tmp_path, monkeypatch, "early", kill_at=2)
    assert any("no checkpoint: starting from step 0 (2 metric rows" in line for line in early.logs), early.logs
    # killed in step 3's update: rows 0..2 and the step-2 checkpoint
    late = _run_killed_at_update(tmp_path, monkeypatch, "late", kill_at=3)
    assert any("resumed from step 2 (3 metric rows kept, 0 later ones dropped)" in line for line in late.logs)
    for run in (early, late):
        assert [r["step"] for r in run.read_metrics()] == [0, 1, 2, 3, 4]  # each step once
        assert _rows(run) == _rows(ref)
        for key in ("final_eval_success", "var_last20", "stable", "steps"):
            assert run.summary()[key] == ref.summary()[key], key


def test_rerun_after_a_corrupt_summary_keeps_the_collapse(tmp_path, monkeypatch):
    # A collapse rule forced to fire once a row of step >= 2 exists (the sanity budget does not
    # stop on it). The summary is then emptied (a damaged disk) and the cell rerun: it resumes
    # from its step-4 checkpoint with no step left to run. The old loop judged collapse only on
    # the steps it ran, so the rerun said "done".
    def forced_rule(history, total_steps, **_):
        return "forced at step 2" if any(r["step"] >= 2 for r in history) else None

    monkeypatch.setattr(trainer_mod, "collapse_reason", forced_rule)
    cfg = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / 'cell'}"])
    assert run_training(cfg, log=lambda *_: None) == 0
    run = RunFolder(tmp_path / "cell")
    before = run.summary()
    assert before["status"] == "collapsed" and before["collapse_reason"] == "forced at step 2"
    run.summary_file.write_text("")
    logs = []
    assert run_training(cfg, log=logs.append) == 0
    assert any("was unreadable; kept as summary.json.corrupt-" in line for line in logs), logs
    after = run.summary()
    for key in ("status", "collapse_reason", "final_eval_success", "var_last20", "stable", "steps"):
        assert after[key] == before[key], key
    # the rerun ran no step, yet its wall_seconds counts the kept rows' step times (the killed
    # process's work): before, it was only the rerun's own few microseconds
    kept_seconds = sum(r["perf/step_seconds"] for r in run.read_metrics())  # 5 rows, each > 0
    assert kept_seconds > 0 and after["wall_seconds"] >= kept_seconds
