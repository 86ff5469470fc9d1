"""A finding's measure (arena/analysis/measures.py, findings.yaml `measure:`): each measure per run by hand,
and the findings table computed on it."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from arena.analysis import claims as C
from arena.analysis import findings as F
from arena.analysis import findings_render as T
from arena.analysis import measures as M
from arena.analysis import run_tables as R


def _runs():
    # (arm, seed, status, start %, final %)
    rows = [("grpo", 0, "done", 30, 40), ("grpo", 1, "done", 30, 42), ("grpo", 2, "done", 30, 41),
            ("cispo", 0, "collapsed", 30, 10), ("cispo", 1, "done", 30, 50), ("cispo", 2, "failed", 30, None)]
    return pd.DataFrame([{"sweep": "s", "arm": a, "env": "sokoban", "seed": s, "status": st,
                          "initial_eval_success": p0 / 100, "final_eval_success": None if p1 is None else p1 / 100}
                         for a, s, st, p0, p1 in rows])


def _tidy():
    # eval curves (%): grpo seed 0 30 -> 45 -> 40; grpo seed 1 30 -> 42; cispo seed 0 30 -> 60 -> 10;
    # cispo seed 1 30 -> 50 (no point above its final); grpo seed 2 and cispo seed 2: no curve
    curves = {("grpo", 0): [30, 45, 40], ("grpo", 1): [30, 42], ("cispo", 0): [30, 60, 10], ("cispo", 1): [30, 50]}
    return pd.DataFrame([{"sweep": "s", "arm": a, "env": "sokoban", "seed": s, "step": 10 * i,
                          "metric": "eval/success_rate", "value": v / 100}
                         for (a, s), values in curves.items() for i, v in enumerate(values)]
                        + [{"sweep": "s", "arm": "grpo", "env": "sokoban", "seed": 0, "step": 10,
                            "metric": "train/success_rate", "value": 0.99}])  # not an eval point: ignored


def test_each_measure_by_hand():
    runs = M.add_measures(_runs(), _tidy())
    # drop_from_best = max(start, curve, final) - final: grpo 45 - 40 = 5, 42 - 42 = 0, no curve -> NaN;
    # cispo 60 - 10 = 50, 50 - 50 = 0; the failed run has no final -> NaN (train/success_rate 99 is not an eval)
    drop = 100 * runs[M.column(M.DROP_FROM_BEST)]
    assert drop.round(9).tolist()[:2] == [5.0, 0.0] and math.isnan(drop[2])
    assert drop.round(9).tolist()[3:5] == [50.0, 0.0] and math.isnan(drop[5])
    # collapsed: 1 for status collapsed, 0 for another finished run, NaN for the failed one
    collapsed = runs[M.column(M.COLLAPSED)].tolist()
    assert collapsed[:5] == [0.0, 0.0, 0.0, 1.0, 0.0] and math.isnan(collapsed[5])
    # without a metrics table there is no curve: drop_from_best is NaN everywhere
    assert M.add_measures(_runs())[M.column(M.DROP_FROM_BEST)].isna().all()
    assert M.column(M.FINAL) == "final_eval_success"


def test_findings_compare_on_the_findings_measure():
    runs = R.normalise_runs(M.add_measures(_runs(), _tidy()))
    claim = lambda measure: C.Claim("F1", "falls", "-", "is_clipping", "cispo", "grpo", "-", -1, measure)  # noqa: E731
    rows = F.finding_rows(runs, [claim("drop_from_best"), claim("collapsed"), claim("final")])
    by_measure = rows.set_index("measure")
    # seeds paired on each measure: drop_from_best seeds 0, 1 (grpo seed 2 has no curve, cispo seed 2 failed):
    # 50 - 5 = +45, 0 - 0 = 0; collapsed seeds 0, 1: 100 - 0 = +100, 0; final seeds 0, 1: -30, +8
    assert by_measure.loc["drop_from_best", "per_seed"] == "+45.0 / +0.0"
    assert by_measure.loc["collapsed", "per_seed"] == "+100.0 / +0.0"
    assert by_measure.loc["final", "per_seed"] == "-30.0 / +8.0"
    assert by_measure.loc["drop_from_best", "mean"] == pytest.approx(22.5)
    markdown = T.render_markdown(runs, rows, F.gain_rows(runs))
    assert "| F1 | CISPO - GRPO | drop_from_best |" in markdown and "| F1 | CISPO - GRPO | collapsed |" in markdown


def test_an_unknown_measure_is_refused_naming_the_valid_ones(tmp_path):
    path = tmp_path / "findings.yaml"
    path.write_text("findings:\n  - {id: X, claim: c, cite: c, dimension: d, measure: best,\n"
                    "     comparisons: [{arm: a, baseline: b, paper: p, sign: 1}]}\n")
    with pytest.raises(ValueError, match="finding X: measure='best': valid: final, drop_from_best, collapsed"):
        C.load_claims(path)
    path.write_text(path.read_text().replace("measure: best", "measure: collapsed"))
    assert [c.measure for c in C.load_claims(path)] == ["collapsed"]
    # today's findings.yaml: F1 and F2 compare whether a run fell, the others the final success
    assert {c.finding for c in C.load_claims() if c.measure == "collapsed"} == {"F1", "F2"}
    assert {c.measure for c in C.load_claims() if c.finding not in ("F1", "F2")} == {"final"}


def test_committed_tables_read_a_metrics_file_beside_them(tmp_path, monkeypatch):
    runs = _runs().drop(columns="sweep")
    runs.to_csv(tmp_path / "clip_runs.csv", index=False)
    _tidy().drop(columns="sweep").to_csv(tmp_path / "clip_metrics.csv", index=False)
    monkeypatch.setattr(R, "_needs_curves", lambda: True)
    read = R.read_run_tables(tmp_path)
    assert (100 * read[M.column(M.DROP_FROM_BEST)]).round(9).tolist()[:2] == [5.0, 0.0]
    (tmp_path / "clip_metrics.csv").unlink()
    assert R.read_run_tables(tmp_path)[M.column(M.DROP_FROM_BEST)].isna().all()
