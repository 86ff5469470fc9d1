"""Collapse-driven verdicts (arena/analysis/collapse_rule.py; docs/methods.md §14, "The mixture null"): the
rule by hand, the mixture null's false-verdict rate before and after it (simulated), and the findings table
printing the counts beside the verdict."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from arena.analysis import claims as C
from arena.analysis import findings as F
from arena.analysis import findings_render as T
from arena.analysis import measures as M
from arena.analysis import run_tables as R
from arena.analysis.collapse_rule import NOT_CONFIRMED, guarded, mixture_rates
from arena.analysis.verdicts import BETTER, NO_DIFFERENCE, UNDERPOWERED, WORSE


def test_the_rule_by_hand():
    # a collapse regime, no fall among the comparison's runs: a better/worse is not confirmed
    assert guarded(BETTER, saw_collapse=False, regime=True) == (f"better ({NOT_CONFIRMED})", False)
    assert guarded(WORSE, saw_collapse=False, regime=True) == (f"worse ({NOT_CONFIRMED})", False)
    # a fall among its runs, or no collapse regime: the t-test's verdict stands
    assert guarded(BETTER, saw_collapse=True, regime=True) == (BETTER, True)
    assert guarded(BETTER, saw_collapse=False, regime=False) == (BETTER, True)
    # "no difference" and "underpowered" are never touched; only underpowered is unresolved
    assert guarded(NO_DIFFERENCE, saw_collapse=False, regime=True) == (NO_DIFFERENCE, True)
    assert guarded(UNDERPOWERED, saw_collapse=True, regime=True) == (UNDERPOWERED, False)


SWEEPS = 20_000
SLACK = 3 * math.sqrt(0.05 * 0.95 / SWEEPS)  # 3 Monte Carlo SE at 5%: 0.0046


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_mixture_null_before_and_after(n):
    """q = 0.2 of the seeds collapse, the rest gain 2 sd (mean 0): a sample without a collapse
    (probability 0.8^n: 51% at 3 seeds, 26% at 6) looks like a clean gain. The t-test's false
    better/worse (measured, 40,000 samples: 24.9%, 31.1%, 30.3%, 25.7% at n = 3-6) is far above 5%;
    the rule (a collapse regime confirms a verdict only when its runs saw a fall) leaves 0.8%, 0.2%,
    0.4%, 0.3%."""
    before, after = mixture_rates(n, 0.2, 2.0, sweeps=SWEEPS, seed=n)
    assert before > 0.05 + SLACK and before <= 1 - 0.2 ** n  # at most the share of samples with a gain
    assert after <= 0.05 + SLACK, (n, before, after)


def test_the_worst_cell_of_the_grid_after_the_rule():
    # q = 1/3, g = 4 sd, 3 seeds: the grid's highest rate after the rule (measured 3.5%), 30.4% before
    before, after = mixture_rates(3, 1 / 3, 4.0, sweeps=SWEEPS, seed=11)
    assert before > 0.25 and after <= 0.05 + SLACK, (before, after)


def test_findings_print_the_counts_and_qualify_an_unseen_collapse():
    # one stress sweep: gspo - grpo gains 4, 5, 6 on seeds 0-2 (t = 5 / (1 / sqrt 3) = 8.66, p = 0.013:
    # better), none of their runs fell, but cispo collapsed on seed 0: a collapse regime -> not confirmed.
    # cispo - grpo = -20, -1, -3 with its own collapse: its verdict stands as the t-test gives it.
    rows = []
    for s in range(3):
        rows += [("grpo", s, "done", True, 40.0), ("gspo", s, "done", True, 44.0 + s),
                 ("cispo", s, "collapsed" if s == 0 else "done", s != 0, [20.0, 39.0, 37.0][s])]
    runs = R.normalise_runs(pd.DataFrame([{"sweep": "stress", "arm": a, "seed": s, "env": "sokoban", "status": st,
                                           "stable": stable, "initial_eval_success": 0.3, "final_eval_success": v / 100,
                                           "budget": "stress", "git_sha": "", "recorded_in": "abc1234"}
                                          for a, s, st, stable, v in rows]))
    found = F.finding_rows(runs, C.load_claims()).set_index("comparison")
    gspo = found.loc["GSPO - GRPO"]
    assert (gspo["verdict"], gspo["collapsed"], gspo["vs_paper"]) == (f"better ({NOT_CONFIRMED})", "0/3 / 0/3", "unresolved")
    cispo = found.loc["CISPO - GRPO"]
    assert cispo["collapsed"] == "1/3 / 0/3" and NOT_CONFIRMED not in cispo["verdict"]
    # the fall indicator counts an unstable run as well as a collapsed one (measures.fell)
    assert M.fell(runs).tolist() == [False, False, True] + [False] * 6
    markdown = T.render_markdown(runs, found.reset_index(), F.gain_rows(runs))
    assert f"| better ({NOT_CONFIRMED}) | 0/3 / 0/3 | unresolved |" in markdown
