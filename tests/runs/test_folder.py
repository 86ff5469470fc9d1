import json

from arena.runs import RunFolder
from arena.runs.layout import SUMMARY_FIELDS

# a summary.json with every field a proof of completion carries (values as build_summary writes them)
VALID_SUMMARY = {**{k: None for k in SUMMARY_FIELDS}, "status": "done", "final_eval_success": 0.5, "stable": True}


def test_resume_keeps_rows_up_to_checkpoint_and_replaces_the_rest(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    for s in range(1, 8):
        run.append_metrics({"step": s, "x": float(s)})
    # killed after step 7 with the last checkpoint at step 5; a torn line was half-written
    with open(run.metrics_file, "a") as fh:
        fh.write('{"step": 8, "x"')
    assert run.truncate_metrics_after(5) == 5
    for s in range(6, 9):
        run.append_metrics({"step": s, "x": 10.0 * s})
    steps = [r["step"] for r in run.read_metrics()]
    assert steps == list(range(1, 9))  # every step exactly once
    assert [r["x"] for r in run.read_metrics()][4:6] == [5.0, 60.0]


def test_summary_is_the_proof_of_completion_and_clears_error(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    assert not run.done and run.summary() is None
    run.write_error("Traceback ...")
    run.write_summary(dict(VALID_SUMMARY))
    assert run.done and run.summary()["status"] == "done" and not run.error_file.exists()
    assert not list(run.path.glob(".*.tmp"))  # no temp files left behind


def test_non_finite_metrics_stay_valid_json(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    run.append_metrics({"step": 1, "actor/pg_loss": float("nan")})
    line = run.metrics_file.read_text().strip()
    assert json.loads(line)["actor/pg_loss"] == "nan"


def test_an_eval_summary_is_checked_against_the_eval_fields_not_the_training_ones(tmp_path):
    from arena.runs.layout import EVAL_SUMMARY_FIELDS

    run = RunFolder(tmp_path / "eval")
    run.path.mkdir()
    evaluated = {**{k: None for k in EVAL_SUMMARY_FIELDS}, "status": "done", "kind": "eval", "eval_id": "ab",
                 "final_eval_success": 0.25, "n_eval": 8}
    run.summary_file.write_text(json.dumps(evaluated))
    # no var_last20/stable/theta: an eval has no training curve, and it is still done
    assert run.done and run.summary()["kind"] == "eval"
    run.summary_file.write_text(json.dumps({k: v for k, v in evaluated.items() if k != "eval_id"}))
    assert not run.done and "lacks eval_id" in run.summary_problem()
    run.summary_file.write_text(json.dumps({**evaluated, "kind": "bench"}))
    assert "kind 'bench'; valid: train, eval" in run.summary_problem()
    # a summary without "kind" is a training run's: the training fields are required
    run.summary_file.write_text(json.dumps({k: v for k, v in evaluated.items() if k != "kind"}))
    assert "lacks var_last20" in run.summary_problem()


def test_a_training_summary_says_kind_train_and_an_older_one_without_kind_still_reads_as_train(tmp_path):
    from arena.runs.summary import build_summary

    # both backends' summaries come from build_summary: 2 eval points, 2 metrics rows
    summary = build_summary(status="done", cell_id="c", points=[(0, 0.25), (2, 0.5)], history=[{"step": 1}, {"step": 2}],
                            total_steps=2, theta=0.0025, min_points=5, n_eval=4, wall_seconds=1.0)
    assert summary["kind"] == "train"
    run = RunFolder(tmp_path / "c").create()
    run.write_summary(summary)
    assert run.done and run.summary()["kind"] == "train"
    # an older arena's summary has no "kind": it is a training run's, and still the proof it finished
    run.summary_file.write_text(json.dumps({k: v for k, v in summary.items() if k != "kind"}))
    assert run.done and run.summary_problem() is None


def test_start_is_the_run_start_of_both_backends(tmp_path):
    # no folder: the run trains (False), and start makes no folder (the first write does)
    logs = []
    run = RunFolder(tmp_path / "cell")
    assert run.start(logs.append) is False and not run.path.exists() and logs == []
    # a torn summary.json is no proof: set aside (kept, not deleted), said, and the run trains again
    run.create().summary_file.write_text('{"status": "do')
    assert run.start(logs.append) is False and not run.summary_file.exists()
    aside = list(run.path.glob("summary.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"status": "do' and "was unreadable" in logs[0]
    # a valid summary.json: done, said, nothing to train
    run.write_summary(dict(VALID_SUMMARY))
    assert run.start(logs.append) is True and logs[1] == f"[train] already done: {run.summary_file}"
