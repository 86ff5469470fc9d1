"""The report's sequence-mask section (arena/analysis/table_data.py, tables.py): each X_sm arm
against its unmasked twin X on the same seed, one Holm family over those pairs (Finding 2)."""
import math

import pandas as pd
import pytest

from arena.analysis.table_data import build_table, unmasked_twin
from arena.analysis.tables import render_markdown

FINALS = {  # arm -> final eval success on seeds 0, 1, 2 (one env)
    "grpo": [0.40, 0.50, 0.60],
    "cispo": [0.30, 0.40, 0.35],
    "cispo_sm": [0.45, 0.50, 0.50],
    "sapo": [0.40, 0.40, 0.40],  # no sapo_sm in this grid: no twin row
}
GROUP = {"grpo": "baseline", "cispo": "clipping", "cispo_sm": "clipping", "sapo": "clipping"}


def _runs() -> pd.DataFrame:
    rows = [dict(arm=arm, env="sokoban", seed=s, status="done", method=arm, group=GROUP[arm], stable=True,
                 final_eval_success=f, initial_eval_success=0.40)
            for arm, finals in FINALS.items() for s, f in enumerate(finals)]
    return pd.DataFrame(rows)


def test_unmasked_twin_needs_both_arms_in_the_grid():
    assert unmasked_twin("cispo_sm", ["cispo", "cispo_sm"]) == "cispo"
    assert unmasked_twin("sapo_sm", ["cispo", "sapo_sm"]) is None
    assert unmasked_twin("cispo", ["cispo", "cispo_sm"]) is None


def test_twin_comparison_by_hand():
    cells, _ = build_table(_runs(), {"grid": list(FINALS), "cells": []}, {})
    # d_s = cispo_sm_s - cispo_s = 45 - 30, 50 - 40, 50 - 35 = 15, 10, 15 points: mean 13.333,
    # sd^2 = (1.667^2 + 3.333^2 + 1.667^2) / 2 = 8.333, SE = sqrt(8.333 / 3) = 1.6667, t = 8.0;
    # df 2: p = 1 - sqrt(t^2 / (t^2 + 2)) = 1 - sqrt(64 / 66) = 0.015268. The family is that pair
    # alone (k = 1): better. Interval 13.333 -/+ t_{0.975, 2} * SE = 13.333 -/+ 4.30265 * 1.6667
    # = [6.162, 20.504].
    row = cells[(cells.arm == "cispo_sm") & (cells.env == "Avg")].iloc[0]
    assert (row.twin_of, row.twin_n, row.twin_verdict) == ("cispo", 3, "better")
    assert row.twin == pytest.approx(40 / 3, rel=1e-9)
    assert row.twin_p == pytest.approx(1 - math.sqrt(64 / 66), rel=1e-9)
    assert (row.twin_ci_low, row.twin_ci_high) == pytest.approx((6.162, 20.504), abs=1e-3)
    for arm in ("grpo", "cispo", "sapo"):  # no twin: blank columns
        other = cells[(cells.arm == arm) & (cells.env == "Avg")].iloc[0]
        assert other.twin_of == "" and other.twin_verdict == "" and math.isnan(other.twin)
    markdown = render_markdown(cells, _, name="twins")
    assert "## Sequence mask: per seed" in markdown and "| cispo_sm - cispo | +13.3 [6.2, 20.5] (n=3)" in markdown
    assert "the 1 _sm arms against their unmasked twins" in markdown


def test_no_section_without_a_pair():
    runs = _runs()
    cells, arms = build_table(runs[runs.arm != "cispo"], {"grid": ["grpo", "cispo_sm", "sapo"], "cells": []}, {})
    assert (cells.twin_of == "").all()
    markdown = render_markdown(cells, arms, name="no-twins")
    assert "Sequence mask" not in markdown and "unmasked twins" not in markdown
