"""The run folder's ledger rules (docs/design.md, Run folder): each finding reproduced, then the
rule it must obey. Files are written by RunFolder itself, or hand-made to look like what a kill
or a bad disk leaves behind."""
import json
import logging
import os
import stat

import pytest

from arena.runs import RunFolder
from arena.io.atomic import atomic_write_json
from arena.runs.folder import MetricsFileError
from arena.runs.layout import SUMMARY_FIELDS

VALID_SUMMARY = {**{k: None for k in SUMMARY_FIELDS}, "status": "done", "final_eval_success": 0.5, "stable": True}


def _rows(n):
    return [{"step": s, "eval/success_rate": s / 10} for s in range(n)]


def _write_lines(run, lines):
    run.metrics_file.write_text("".join(line + "\n" for line in lines))


def test_rerun_without_checkpoint_starts_metrics_over_and_a_step_is_written_once(tmp_path):
    # killed before the first checkpoint after steps 0,1,2: the rerun restarts from step 0; the
    # old code appended, leaving 0,1,2,0,1,2. Rule: reset to nothing (no checkpoint), then each step once.
    run = RunFolder(tmp_path / "cell").create()
    for row in _rows(3):
        run.append_metrics(row)
    rerun = RunFolder(tmp_path / "cell")
    assert rerun.reset_metrics(None) == (0, 3)  # 0 kept, 3 dropped
    for row in _rows(4):
        rerun.append_metrics(row)
    assert [r["step"] for r in rerun.read_metrics()] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="step 2 is written already"):
        rerun.append_metrics({"step": 2})
    with pytest.raises(ValueError, match="step 1 is written already"):  # also for a fresh reader
        RunFolder(tmp_path / "cell").append_metrics({"step": 1})


def test_duplicated_steps_on_disk_are_an_error_naming_file_and_line(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    _write_lines(run, [json.dumps(r) for r in _rows(3) + _rows(3)])  # 0,1,2,0,1,2: lines 4-6 repeat
    with pytest.raises(MetricsFileError, match=r"metrics.jsonl, line 4: step 0 again \(first at line 1\)"):
        run.read_metrics()


def test_bad_line_in_the_middle_is_an_error_and_resume_deletes_nothing(tmp_path):
    # line 2 of 4 is garbage: the old reader stopped there (1 of 4 steps shown, exit 0) and a
    # resume rewrote the file without lines 3-4. Rule: error naming file and line; bytes unchanged.
    run = RunFolder(tmp_path / "cell").create()
    rows = [json.dumps(r) for r in _rows(3)]
    _write_lines(run, [rows[0], '{"step": 1, "eval/succ', rows[1], rows[2]])
    before = run.metrics_file.read_bytes()
    with pytest.raises(MetricsFileError) as err:
        run.read_metrics()
    assert str(run.metrics_file) in str(err.value) and "line 2" in str(err.value)
    with pytest.raises(MetricsFileError, match="line 2"):
        run.reset_metrics(1)
    with pytest.raises(MetricsFileError, match="line 2"):
        run.append_metrics({"step": 5})
    assert run.metrics_file.read_bytes() == before


def test_torn_last_line_is_dropped_with_a_warning_and_rows_after_it_stay_visible(tmp_path, caplog):
    run = RunFolder(tmp_path / "cell").create()
    for row in _rows(2):
        run.append_metrics(row)
    with open(run.metrics_file, "a") as fh:
        fh.write('{"step": 2, "eval/su')  # the writer was killed mid-row: no newline after it
    with caplog.at_level(logging.WARNING):
        assert [r["step"] for r in run.read_metrics()] == [0, 1]
    assert "torn last line 3" in caplog.text
    again = RunFolder(tmp_path / "cell")
    again.append_metrics({"step": 2, "eval/success_rate": 0.2})  # not glued onto the half row
    again.append_metrics({"step": 3, "eval/success_rate": 0.3})
    assert [r["step"] for r in RunFolder(tmp_path / "cell").read_metrics()] == [0, 1, 2, 3]


def test_complete_last_row_without_newline_is_kept(tmp_path):
    # a kill between the row and its newline: the row is whole, so it is kept, and the next
    # append starts on a new line
    run = RunFolder(tmp_path / "cell").create()
    run.metrics_file.write_text(json.dumps({"step": 0}) + "\n" + json.dumps({"step": 1}))
    fresh = RunFolder(tmp_path / "cell")
    assert [r["step"] for r in fresh.read_metrics()] == [0, 1]
    fresh.append_metrics({"step": 2})
    assert [r["step"] for r in RunFolder(tmp_path / "cell").read_metrics()] == [0, 1, 2]


def test_resume_truncates_to_the_checkpoint_step(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    for row in _rows(6):
        run.append_metrics(row)
    assert run.reset_metrics(3) == (4, 2)  # steps 0..3 kept, 4 and 5 dropped
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2, 3]
    run.append_metrics({"step": 4})
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("text", ["", '{"status": "done", "final_ev', "[]", '{"status": "done"}'])
def test_empty_truncated_or_incomplete_summary_is_not_done_and_is_set_aside(tmp_path, text):
    run = RunFolder(tmp_path / "cell").create()
    run.summary_file.write_text(text)
    assert not run.done and run.summary() is None
    assert str(run.summary_file) in run.summary_problem()  # the message names the file
    aside = run.set_aside_summary()
    assert aside is not None and aside.read_text() == text  # kept, not deleted
    assert aside.name.startswith("summary.json.corrupt-") and not run.summary_file.exists()


def test_valid_summary_is_done_and_not_set_aside(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    run.write_summary(dict(VALID_SUMMARY))
    assert run.done and run.summary()["final_eval_success"] == 0.5
    assert run.set_aside_summary() is None and run.summary_file.exists()


def test_written_files_get_the_users_umask_and_are_fsynced(tmp_path, monkeypatch):
    # tempfile.mkstemp creates 0600 files; after os.replace a lab-mate could not read them.
    # Rule: mode = 0666 & ~umask (umask 022 -> 0644); the file and its folder are fsynced.
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real_fsync(fd))
    old = os.umask(0o022)
    try:
        run = RunFolder(tmp_path / "cell").create()
        run.write_config("a: 1\n")
        run.write_summary(dict(VALID_SUMMARY))
        atomic_write_json(tmp_path / "manifest.json", {"cells": []})
        run.append_metrics({"step": 0})
    finally:
        os.umask(old)
    for path in (run.config_file, run.summary_file, tmp_path / "manifest.json", run.metrics_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert str(run.path) in synced  # the folder, after a rename into it
    assert any(p.startswith(str(run.path / ".summary.json.")) for p in synced)  # the temp file, before it
    assert str(run.metrics_file) in synced  # each metrics row


def test_group_readable_umask_is_followed(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_json(tmp_path / "x.json", {})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o640  # 0666 & ~0027
