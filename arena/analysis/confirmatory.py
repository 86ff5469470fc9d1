"""The report's confirmatory verdicts (docs/methods.md §14, "Confirmatory and exploratory"; docs/design.md,
Report): the swept dimension's rows of findings.yaml, each finding one family at ALPHA (Holm within it),
each on its finding's measure (measures.py). They were fixed before any data, so their verdicts keep the
rule's error guarantee. Every other comparison of the report (gains over the start, arms against the
baseline, sequence-mask twins) is exploratory: an estimate with its interval, no verdict word.

A grid that holds no finding's two arms (a dimension findings.yaml does not name, or a custom grid) gets
one family instead, fixed by the grid alone: every arm against the baseline, on the final eval.
seeds=auto stops on the same families (arena/sweeps/auto_seeds.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from . import measures, verdicts
from .claims import Claim, load_claims
from .collapse_rule import counts_text, guarded
from .findings_render import display
from .measures import collapsed_runs
from .paper_compare import agreement

WHY = ("Confirmatory verdicts are the swept dimension's rows of arena/analysis/findings.yaml: each finding is "
       "one family (Holm within it, family-wise error {alpha:g}), its comparisons and measure fixed in the "
       "repository before any run, so a better/worse there keeps the rule's error rate. Every other number "
       "(gains over the start, other arm pairs) is exploratory: an estimate with its interval and no verdict "
       "word, because it was not chosen before the data and, read as a test, would multiply the chances of a "
       "false finding.")


@dataclass(frozen=True)
class Family:
    """One confirmatory family: a finding's comparisons held by the grid, judged together."""
    id: str
    claim: str
    members: tuple[Claim, ...]

    @property
    def measure(self) -> str:
        return self.members[0].measure


def families_for(dimension: Optional[str], arms: Sequence[str], baseline: Optional[str]) -> list[Family]:
    """The findings of `dimension` whose comparisons' two arms the grid holds (the members it lacks
    are left out), in findings.yaml order; none held: every arm against `baseline` (if any)."""
    held = [c for c in load_claims() if c.dimension == dimension and c.arm in arms and c.baseline in arms]
    families = []
    for finding in dict.fromkeys(c.finding for c in held):
        members = tuple(c for c in held if c.finding == finding)
        families.append(Family(finding, members[0].claim, members))
    if families or baseline is None or baseline not in arms:
        return families
    claim = f"each arm against {baseline} (no finding of findings.yaml for this grid)"
    members = tuple(Claim(f"vs {baseline}", claim, "-", dimension or "", arm, baseline, "-", None)
                    for arm in arms if arm != baseline)
    return [Family(f"vs {baseline}", claim, members)] if members else []


def paired_in_every_env(runs: pd.DataFrame, arm: str, baseline: str, value: str) -> pd.Series:
    """d_s = (1/M) sum_e 100 (x_{arm,e,s} - x_{baseline,e,s}) over the M envs of `runs`, for the seeds
    paired in every env (the report's missing-data rule: a seed lacking a pair in one env is left out,
    so each d_s averages the same envs); seeds in order."""
    a = runs[runs["arm"] == arm].set_index(["seed", "env"])[value]
    b = runs[runs["arm"] == baseline].set_index(["seed", "env"])[value]
    d = (100.0 * (a - b)).dropna()  # [(seed, env) pairs both have]
    per_seed = d.groupby(level="seed")
    complete = per_seed.size() == runs["env"].nunique()  # [seeds]
    return per_seed.mean()[complete].sort_index()


def judge(runs: pd.DataFrame, families: Sequence[Family], *, min_effect: float = verdicts.MIN_EFFECT,
          alpha: float = verdicts.ALPHA, bound=None) -> pd.DataFrame:
    """One row per member: the finding's measure, its paired d_s (points; mean over envs of seed s),
    the rule within the family (verdicts.compare_family; `bound`: a seeds=auto sweep's
    group-sequential bound, verdicts.SpendingBound) and the paper's direction."""
    needs = {f.measure for f in families} - {measures.FINAL}
    if needs and any(measures.column(m) not in runs for m in needs):
        runs = measures.add_measures(runs)
    regime = collapsed_runs(runs) > 0  # a collapse regime: some run of the sweep collapsed (collapse_rule.py)
    out = []
    for family in families:
        column = measures.column(family.measure)
        diffs = [paired_in_every_env(runs, c.arm, c.baseline, column) for c in family.members]  # by position
        extra = {"bound": bound} if bound is not None else {}
        result = verdicts.compare_family({i: d.tolist() for i, d in enumerate(diffs)}, min_effect=min_effect,
                                         alpha=alpha, **extra)
        for i, c in enumerate(family.members):
            r = result[i]
            arm_runs, base_runs = (_paired_runs(runs, name, diffs[i].index) for name in (c.arm, c.baseline))
            seen = collapsed_runs(arm_runs) + collapsed_runs(base_runs) > 0
            shown, confirmed = guarded(r.verdict, seen, regime)
            out.append({"finding": family.id, "comparison": f"{display(c.arm)} - {display(c.baseline)}",
                        "arm": c.arm, "baseline": c.baseline, "measure": family.measure, "k": len(family.members),
                        "n": r.n, "mean": r.mean, "low": r.low, "high": r.high, "p_adjusted": r.p_adjusted,
                        "mde": r.mde, "verdict": shown, "confirmed": confirmed, "seeds_needed": r.seeds_needed,
                        "collapsed": counts_text(collapsed_runs(arm_runs), len(arm_runs), collapsed_runs(base_runs),
                                                 len(base_runs)),
                        "per_seed": " / ".join(f"{v:+.1f}" for v in diffs[i]), "paper": c.paper,
                        "vs_paper": agreement(r.verdict if shown == r.verdict else verdicts.UNDERPOWERED, c.sign)})
    return pd.DataFrame(out, columns=COLUMNS)


def _paired_runs(runs: pd.DataFrame, arm: str, seeds) -> pd.DataFrame:
    """The arm's runs on the paired seeds (every env)."""
    return runs[(runs["arm"] == arm) & runs["seed"].isin(list(seeds))]


COLUMNS = ("finding", "comparison", "arm", "baseline", "measure", "k", "n", "mean", "low", "high", "p_adjusted", "mde",
           "verdict", "confirmed", "seeds_needed", "collapsed", "per_seed", "paper", "vs_paper")


def _num(x, fmt: str = "+.1f") -> str:
    return "—" if x is None or pd.isna(x) else format(x, fmt)


def _interval(row) -> str:
    if pd.isna(row["low"]):
        return "n<2"
    return "tied" if abs(row["low"]) == float("inf") else f"[{_num(row['low'])}, {_num(row['high'])}]"


def lines(rows: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """(column names, one text row per member) for the markdown and LaTeX renderers."""
    header = ["finding", "comparison", "measure", "d [CI] (n)", "per seed", "p (Holm)", "verdict",
              "collapsed or unstable: arm / baseline", "detects", "vs paper"]
    body = []
    for _, r in rows.iterrows():
        needed = f"; ~{int(r['seeds_needed'])} seeds" if pd.notna(r["seeds_needed"]) else ""
        body.append([r["finding"], r["comparison"], r["measure"], f"{_num(r['mean'])} {_interval(r)} (n={r['n']})",
                     r["per_seed"] or "—", _num(r["p_adjusted"], ".3f"), r["verdict"], r["collapsed"],
                     _num(r["mde"], ".1f") + needed, r["vs_paper"]])
    return header, body


def notes(rows: pd.DataFrame, *, min_effect: float, alpha: float = verdicts.ALPHA, bound=None) -> list[str]:
    """Why these rows carry verdicts and the others do not, and how the families are judged."""
    families = ", ".join(f"{f} (k={k})" for f, k in rows.drop_duplicates("finding")[["finding", "k"]].itertuples(index=False))
    level = bound.describe() if bound is not None else f"family-wise alpha {alpha:g}"
    return [WHY.format(alpha=alpha),
            f"Families: {families or 'none'}; {level}. d_s = arm_s - baseline_s on the finding's measure "
            f"({'; '.join(f'{m}: {t}' for m, t in measures.MEASURES.items())}), in points, averaged over envs per "
            f"seed. Verdict: better/worse = the paired t-test rejects 0 after Holm; no difference = the 1 - alpha/k "
            f"interval lies inside ±{min_effect:g} points; underpowered = neither (docs/methods.md §14).",
            "collapsed: the runs of the arm and of the baseline on the paired seeds that fell by their own rules (status collapsed, or unstable by the stability criterion). "
            "When some run of the sweep fell (a collapse regime), a better/worse whose runs saw no collapse is "
            "printed \"(no collapse seen)\" and is not confirmed: a few collapses with small gains elsewhere (mean "
            "0) give such samples often (docs/methods.md §14, the mixture null)."]
