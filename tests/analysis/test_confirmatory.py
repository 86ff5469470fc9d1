"""The report's confirmatory families (arena/analysis/confirmatory.py): which comparisons get verdicts, and
that Holm runs within each finding, not across them; hand-derived small cases."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from arena.analysis import confirmatory as C
from arena.analysis.verdicts import BETTER, NO_DIFFERENCE, UNDERPOWERED, WORSE

from .synthetic import claims_on_final

CLIPPING = ["grpo", "gspo", "cispo", "sapo", "cispo_sm", "sapo_sm"]


def p_df2(d):
    """Two-sided paired-t p of 3 differences, closed form at 2 df: 1 - t / sqrt(t^2 + 2)."""
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    t = abs(mean) / (sd / math.sqrt(3))
    return 1 - t / math.sqrt(t * t + 2)


def test_families_are_the_dimensions_findings():
    families = C.families_for("is_clipping", CLIPPING, "grpo")
    assert [(f.id, [(c.arm, c.baseline) for c in f.members]) for f in families] == [
        ("F1", [("cispo", "grpo"), ("sapo", "grpo")]), ("F2", [("cispo_sm", "cispo"), ("sapo_sm", "sapo")]),
        ("GSPO", [("gspo", "grpo")])]
    # a grid lacking sapo keeps the members it holds
    assert [(f.id, len(f.members)) for f in C.families_for("is_clipping", ["grpo", "cispo", "cispo_sm"], "grpo")] == [
        ("F1", 1), ("F2", 1)]
    # no finding names the dimension: one family, every arm against the baseline
    (only,) = C.families_for("advantage", ["grpo", "gigpo", "empg"], "grpo")
    assert only.id == "vs grpo" and [(c.arm, c.baseline) for c in only.members] == [("gigpo", "grpo"), ("empg", "grpo")]
    assert C.families_for("advantage", ["gigpo"], None) == []


def _runs(finals: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"sweep": "s", "arm": arm, "env": "sokoban", "seed": s, "status": "done",
                          "final_eval_success": v / 100, "initial_eval_success": 0.3}
                         for arm, values in finals.items() for s, v in enumerate(values)])


def test_holm_runs_within_each_finding(monkeypatch):
    # every finding on the final eval success here (findings.yaml compares F1 and F2 on falls; the
    # Holm arithmetic below is derived on final successes): synthetic.claims_on_final
    monkeypatch.setattr(C, "load_claims", claims_on_final)
    # grpo 40 on seeds 0-2. F1: cispo - grpo = -10, -12, -14 (t = 12 / (2 / sqrt 3) = 10.39, p = 0.0092);
    # sapo - grpo = +1, -1, 0 (p = 1). Holm over F1's two: cispo 2 x 0.0092 = 0.0184 < 0.05 -> worse;
    # sapo's Bonferroni interval (two-sided 0.05 / 2, df 2: t 6.205, half width 6.205 / sqrt 3 = 3.58) lies
    # inside +-5 -> no difference. F2: cispo_sm - cispo = 10, 11, 12 (p = 0.00274, x 2 = 0.0055) -> better;
    # sapo_sm - sapo = 0, 0, 0 (all tied at 0: p = 1). GSPO (k = 1): gspo - grpo = 3, -3, 0 -> p = 1.
    grpo = [40.0, 40.0, 40.0]
    cispo = [30.0, 28.0, 26.0]
    sapo = [41.0, 39.0, 40.0]
    runs = _runs({"grpo": grpo, "gspo": [43.0, 37.0, 40.0], "cispo": cispo, "sapo": sapo,
                  "cispo_sm": [c + d for c, d in zip(cispo, [10.0, 11.0, 12.0])], "sapo_sm": sapo})
    rows = C.judge(runs, C.families_for("is_clipping", CLIPPING, "grpo")).set_index("comparison")
    assert rows.loc["CISPO - GRPO", "p_adjusted"] == pytest.approx(2 * p_df2([-10, -12, -14]), rel=1e-6)
    assert rows.loc["CISPO_SM - CISPO", "p_adjusted"] == pytest.approx(2 * p_df2([10, 11, 12]), rel=1e-6)
    assert list(rows["verdict"]) == [WORSE, NO_DIFFERENCE, BETTER, UNDERPOWERED, UNDERPOWERED]
    assert rows.loc["SAPO - GRPO", "high"] == pytest.approx(6.205 / math.sqrt(3), abs=1e-3)
    assert list(rows["k"]) == [2, 2, 2, 2, 1] and set(rows["measure"]) == {"final"}
    assert list(rows["vs_paper"]) == ["agrees", "not found", "agrees", "unresolved", "unresolved"]
    assert rows.loc["CISPO - GRPO", "per_seed"] == "-10.0 / -12.0 / -14.0"
