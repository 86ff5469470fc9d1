"""`arena report` on a sweep whose metrics.jsonl has a bad line in the middle: the old reader
stopped at it, so the curves showed 1 of the run's steps and the report exited 0. Now it is an
error (exit 2) naming the file and the line, and the file is left as it was."""
import json

from arena.cli import main
from tests.analysis.synthetic import SHA, write_cell

NAME = "tiny"


def _one_cell_sweep(root):
    cell = write_cell(root, name=NAME, arm="grpo", env="sokoban", seed=0, role="report", final=0.5, sha=SHA)
    manifest = {"name": NAME, "dimension": "clipping", "grid": ["grpo"], "cells": [cell]}
    (root / "sweeps" / NAME / "manifest.json").write_text(json.dumps(manifest))


def test_report_names_the_bad_metrics_line_and_exits_2(tmp_path, capsys):
    _one_cell_sweep(tmp_path)
    metrics = next((tmp_path / "sweeps" / NAME / "cells").glob("*/metrics.jsonl"))
    lines = metrics.read_text().splitlines(keepends=True)
    lines[1] = '{"step": 1, "eval/succ\n'  # line 2 of 11: a bad line with valid rows after it
    metrics.write_text("".join(lines))
    before = metrics.read_bytes()
    assert main(["report", f"name={NAME}", f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert f"{metrics}, line 2" in err
    assert metrics.read_bytes() == before
