"""Collapse-driven verdicts (docs/methods.md §14, "The mixture null"): the collapse counts printed beside
every confirmatory verdict, and the rule's one adjustment for a collapse regime.

The mixture null: most seeds gain a little and a few collapse, with mean 0,
    d_s = +g + e_s with probability 1 - q,   d_s = -c + e_s with probability q,   c = g (1 - q) / q,
e_s ~ N(0, sigma^2). A sample of n seeds without a collapse (probability (1 - q)^n: 73% at q = 0.1, n = 3)
looks like a clean gain, and the t-test calls it "better" (measured up to 86% at 3 seeds). No test of
a mean on 3-6 seeds can tell such a sample from a real gain; what the runs do tell is whether a collapse
was seen. Hence the rule, in a collapse regime (some run of the sweep fell: collapsed, or unstable by the
stability criterion; measures.fell):
    a "better" or "worse" on a comparison none of whose runs (either arm, the paired seeds) fell
    is not confirmed: it prints as "better (no collapse seen)" and counts as unresolved (vs the paper:
    unresolved; seeds=auto gives it more seeds).
A verdict whose seeds include a fall stands: its spread carries it. Measured after the
rule: at most 2.5% false better/worse over the same grid (mixture_rates; tests/analysis/
test_collapse_rule.py). Outside a collapse regime the rule is the t-test's, unchanged.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import verdicts

NOT_CONFIRMED = "no collapse seen"


def guarded(verdict: str, saw_collapse: bool, regime: bool) -> tuple[str, bool]:
    """(the verdict as printed, whether it is confirmed): a better/worse in a collapse regime whose runs
    saw no collapse is printed with NOT_CONFIRMED and is not confirmed; everything else is as the
    t-test rule gives it ("no difference" and "underpowered" are never touched)."""
    directional = verdict in (verdicts.BETTER, verdicts.WORSE)
    if directional and regime and not saw_collapse:
        return f"{verdict} ({NOT_CONFIRMED})", False
    return verdict, verdict != verdicts.UNDERPOWERED


def counts_text(arm_collapsed: int, arm_runs: int, base_collapsed: int, base_runs: int) -> str:
    """"1/4 / 0/4": collapsed runs of the arm and of the baseline, of their runs on the paired seeds."""
    return f"{arm_collapsed}/{arm_runs} / {base_collapsed}/{base_runs}"


def mixture_rates(n: int, q: float, gain_over_sd: float, *, sweeps: int, seed: int = 0) -> tuple[float, float]:
    """(before, after): the share of mixture-null samples of n seeds (sigma = 1, g = gain_over_sd) that
    the t-test calls better or worse, and that the guarded rule (collapse regime) still confirms."""
    rng = np.random.default_rng(seed)
    collapse = rng.random((sweeps, n)) < q  # [S, n]
    g = gain_over_sd
    d = np.where(collapse, -g * (1 - q) / q, g) + rng.standard_normal((sweeps, n))  # [S, n]
    words = verdicts.verdicts_of_samples(d[:, None, :])[:, 0]  # [S] one comparison per sample
    wrong = np.isin(words, (verdicts.BETTER, verdicts.WORSE))  # [S]
    # the rule in a collapse regime: a sample's runs saw a fall when one of its seeds collapsed
    confirmed = np.array([guarded(w, seen, True)[1] for w, seen in zip(words, collapse.any(axis=1))])  # [S]
    return float(wrong.mean()), float((wrong & confirmed).mean())


def mixture_table(ns: Sequence[int] = (3, 4, 5, 6), qs: Sequence[float] = (0.1, 0.2, 1 / 3),
                  gains: Sequence[float] = (0.5, 1.0, 2.0, 4.0), *, sweeps: int = 40_000) -> dict:
    """{(q, g/sigma): {n: (before, after)}} over the grid (the table in docs/methods.md §14)."""
    return {(q, g): {n: mixture_rates(n, q, g, sweeps=sweeps, seed=1000 * n + int(100 * q) + int(10 * g))
                     for n in ns} for q in qs for g in gains}
