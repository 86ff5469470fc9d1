"""`seeds=auto`: how many seeds each arm gets, decided in rounds from the results so far
(docs/design.md, Sweep: seeds=auto). Everything here is pure: the sweep (auto_sweep.py) reads
the scores from disk and runs the cells this module asks for.

The procedure
  families  the report's confirmatory families (arena.analysis.confirmatory.families_for): the swept
            dimension's findings of findings.yaml, the sequence-mask twins of F2 among them, each
            comparison `arm - baseline` on its finding's measure; a grid with no finding: every arm
            against the baseline. Nothing else (gains over the start, other pairs) stops or grows.
  round 1   every arm runs seeds 0 .. first-1 (first = min(FIRST_SEEDS, max_seeds));
  look r    when every cell of round r has finished, each family is judged by the one verdict rule
            (arena.analysis.verdicts.compare_family, Holm within the family) under the sweep's
            group-sequential bound (AutoSeeds.bound). A comparison is unresolved while it is
            "underpowered"; its pairs are the seeds both its arms have, 0 .. m-1,
            m = min(n_arm, n_baseline);
  round r+1 for each unresolved comparison with m < max_seeds, each of its two arms that has exactly m
            seeds gets seed m (grow_mask), so every arm's seeds stay 0 .. n-1;
  stop      when no arm gets a seed: every comparison is resolved or has max_seeds pairs.

Error control. A comparison's pair count runs through the fixed schedule first, first + 1, ...,
max_seeds (one seed a round), so a group-sequential bound applies: Lan-DeMets alpha spending with the
O'Brien-Fleming-type function over those looks (arena.analysis.sequential). At m pairs its t-test is
judged at the bound's nominal level for m, and Holm steps down within the family on those levels
(verdicts._sequential_holm). A true-null comparison crosses its bound at some look with probability
<= its level whatever the stopping (early stopping for "no difference", or because the other
comparisons stopped, only removes looks), and Holm's union over the m0 true nulls keeps
P(a false "better"/"worse" in the family) <= 0.05. The report judges the final data under the same
bound (the manifest records it). Measured by simulation: tests/sweeps/test_auto_seeds.py (fast),
analysis/sim_auto_seeds.py (the table in docs/design.md, Sweep: seeds=auto).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

FIRST_SEEDS = 3  # seeds every arm runs before the first look (fewer when max_seeds is smaller)
DEFAULT_MAX_SEEDS = 10  # max_seeds when seeds=auto comes without one
BOUND = "Lan-DeMets O'Brien-Fleming"  # the manifest's name for the bound (arena.analysis.sequential)


@dataclass(frozen=True)
class AutoSeeds:
    """The sweep's seeds=auto settings: its families are judged at family-wise `alpha` under `bound`."""
    max_seeds: int
    min_effect: float

    @property
    def first(self) -> int:
        return min(FIRST_SEEDS, self.max_seeds)

    @property
    def looks(self) -> int:
        # the pair counts a comparison can be judged at: first, first + 1, ..., max_seeds
        return self.max_seeds - self.first + 1

    @property
    def alpha(self) -> float:
        # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
        from arena.analysis.verdicts import ALPHA

        return ALPHA

    @property
    def bound(self):
        # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
        from arena.analysis.sequential import SpendingBound

        return SpendingBound(self.first, self.max_seeds)

    def record(self) -> dict[str, Any]:
        """What the manifest keeps (the report judges the final data under this bound)."""
        return {"max_seeds": self.max_seeds, "first_seeds": self.first, "looks": self.looks, "alpha": self.alpha,
                "bound": BOUND, "min_effect": self.min_effect}


def parse_auto(seeds: Any, max_seeds: Any, min_effect: Any) -> Optional[AutoSeeds]:
    """AutoSeeds for `seeds=auto`, None for a fixed seeds= value; ValueError naming the valid
    values for max_seeds or min_effect given without seeds=auto, or out of range."""
    if seeds != "auto":
        extra = [k for k, v in (("max_seeds", max_seeds), ("min_effect", min_effect)) if v is not None]
        if extra:
            raise ValueError(f"{' and '.join(extra)} appl{'y' if len(extra) > 1 else 'ies'} only with seeds=auto; valid: seeds=auto "
                             f"{' '.join(f'{k}=...' for k in extra)}, or a fixed seeds=N / seeds=[...] without them")
        return None
    # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
    from arena.analysis.verdicts import MIN_EFFECT

    max_seeds = DEFAULT_MAX_SEEDS if max_seeds is None else max_seeds
    if not isinstance(max_seeds, int) or isinstance(max_seeds, bool) or max_seeds < 2:
        raise ValueError(f"max_seeds={max_seeds!r}: valid: an integer >= 2 (seeds per arm at most; "
                         f"default {DEFAULT_MAX_SEEDS}); a paired test needs 2 seeds")
    min_effect = MIN_EFFECT if min_effect is None else min_effect
    if not isinstance(min_effect, (int, float)) or isinstance(min_effect, bool) or not min_effect > 0 \
            or not math.isfinite(min_effect):
        raise ValueError(f"min_effect={min_effect!r}: valid: a number of points > 0 (default {MIN_EFFECT:g}): "
                         "the difference a 'no difference' verdict must rule out")
    return AutoSeeds(max_seeds=max_seeds, min_effect=float(min_effect))


@dataclass(frozen=True)
class Pair:
    """One confirmatory comparison: `arm - baseline` per seed on `measure`, in family `family`."""
    family: str
    name: str
    arm: str
    baseline: str
    measure: str = "final"


def pairs_of(families: Sequence[Any]) -> list[Pair]:
    """The comparisons of confirmatory.Family objects, in order."""
    # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
    from arena.analysis.findings_render import display

    return [Pair(f.id, f"{display(c.arm)} - {display(c.baseline)}", c.arm, c.baseline, c.measure)
            for f in families for c in f.members]


def grow_mask(unresolved: np.ndarray, ends: np.ndarray, counts: np.ndarray, max_seeds: int) -> np.ndarray:
    """Which arms get the next seed; unresolved [..., C] over the C comparisons, ends [C, 2] the
    (arm, baseline) index of each, counts [..., A] over the A arms (simulations stack on the left).
        m_c    = min(counts_arm(c), counts_baseline(c))      the pairs of comparison c
        grow_a = any over c with a as an end of: unresolved_c and m_c < max_seeds and counts_a == m_c
    An end with more than m_c seeds already has seed m_c; each arm's seeds stay 0 .. counts - 1, and no
    arm passes max_seeds (it grows only when counts_a = m_c < max_seeds)."""
    unresolved = np.asarray(unresolved, dtype=bool)  # [..., C]
    counts = np.asarray(counts)  # [..., A]
    grow = np.zeros(counts.shape, dtype=bool)  # [..., A]
    for c, (a, b) in enumerate(np.asarray(ends).reshape(-1, 2)):
        m = np.minimum(counts[..., a], counts[..., b])  # [...]
        need = unresolved[..., c] & (m < max_seeds)  # [...]
        grow[..., a] |= need & (counts[..., a] == m)
        grow[..., b] |= need & (counts[..., b] == m)
    return grow


@dataclass
class Decision:
    """One look: every comparison's Comparison and printed verdict (by pair name), the unresolved
    ones, the arms that grow."""
    counts: dict[str, int]
    comparisons: dict[str, Any]
    unresolved: list[str]
    grow: list[str]
    shown: dict[str, str] = field(default_factory=dict)


def decide(diffs: Mapping[str, Sequence[float]], counts: Mapping[str, int], pairs: Sequence[Pair],
           auto: AutoSeeds, fallen: Optional[Mapping[str, bool]] = None, regime: bool = False) -> Decision:
    """One look: each family judged (compare_family under auto.bound), then grow_mask. `diffs` holds
    each pair's d_s on its pairs so far (points), `counts` every arm's seeds so far (in order);
    `fallen[pair]`: a run of the pair's seeds fell (collapsed or unstable), `regime`: some run of the
    sweep did. A comparison is unresolved while underpowered, or while its better/worse is not
    confirmed (collapse_rule.guarded: a collapse regime, no fall among its runs)."""
    # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
    from arena.analysis.collapse_rule import guarded
    from arena.analysis.verdicts import compare_family

    comparisons: dict[str, Any] = {}
    for family in dict.fromkeys(p.family for p in pairs):
        members = {p.name: diffs[p.name] for p in pairs if p.family == family}
        comparisons.update(compare_family(members, min_effect=auto.min_effect, alpha=auto.alpha, bound=auto.bound))
    arms = list(counts)
    judged = {p.name: guarded(comparisons[p.name].verdict, bool((fallen or {}).get(p.name)), regime) for p in pairs}
    unresolved = [p.name for p in pairs if not judged[p.name][1]]
    ends = np.array([[arms.index(p.arm), arms.index(p.baseline)] for p in pairs], dtype=int).reshape(-1, 2)
    mask = grow_mask(np.array([p.name in unresolved for p in pairs], dtype=bool), ends,
                     np.array([counts[a] for a in arms]), auto.max_seeds)
    return Decision(counts=dict(counts), comparisons=comparisons, unresolved=unresolved,
                    grow=[a for a, g in zip(arms, mask) if g], shown={name: text for name, (text, _) in judged.items()})


# one arm's seed: {measure: points} (final, start and each measure the families read), or None while unfinished
Scores = Callable[[str, int], Optional[Mapping[str, float]]]


@dataclass
class History:
    """The rounds so far, replayed from the scores on disk: `counts` is the current round's
    seeds per arm; `complete` when the last look grew no arm (the sweep is finished)."""
    counts: dict[str, int]
    looks: list[Decision] = field(default_factory=list)
    complete: bool = False


def replay(arms: Sequence[str], pairs: Sequence[Pair], auto: AutoSeeds, scores: Scores) -> History:
    """Every look whose cells have all finished, from round 1: the same scores give the same
    decisions, so a rerun (or a resumed sweep) reaches the rounds it had reached, and the one
    it was in. A look reads only the seeds of its own round."""
    counts = {a: auto.first for a in arms}
    history = History(counts=counts)
    while True:
        got = {a: [scores(a, s) for s in range(counts[a])] for a in arms}
        if any(x is None for row in got.values() for x in row):
            return history  # this round still has cells to run
        # points: d_s = x_s(arm) - x_s(baseline) on the pair's measure, seeds 0 .. m-1
        paired = {p.name: range(min(counts[p.arm], counts[p.baseline])) for p in pairs}
        diffs = {p.name: [got[p.arm][s][p.measure] - got[p.baseline][s][p.measure] for s in paired[p.name]]
                 for p in pairs}
        # a fall (collapsed or unstable) in some env of the seed: its "collapsed" measure is above 0
        fell = {a: [bool(x.get("collapsed", 0.0) > 0) for x in got[a]] for a in arms}
        fallen = {p.name: any(fell[p.arm][s] or fell[p.baseline][s] for s in paired[p.name]) for p in pairs}
        decision = decide(diffs, counts, pairs, auto, fallen, any(any(f) for f in fell.values()))
        history.looks.append(decision)
        if not decision.grow:
            history.complete = True
            return history
        counts = {a: counts[a] + (a in decision.grow) for a in arms}
        history.counts = counts


def seed_reasons(history: History, auto: AutoSeeds, pairs: Sequence[Pair]) -> dict[str, dict[str, Any]]:
    """arm -> {"seeds": n, "reason": why it has n seeds, "verdicts": {comparison: verdict}} after the
    last look, over the comparisons the arm is an end of. "resolved at look k" names the look after
    which the arm got no more seeds."""
    if not history.looks:
        return {a: {"seeds": n, "reason": "round 1 not finished", "verdicts": {}} for a, n in history.counts.items()}
    last = history.looks[-1]
    out = {}
    for arm, n in history.counts.items():
        own = [p.name for p in pairs if arm in (p.arm, p.baseline)]
        verdicts = {name: last.shown.get(name, last.comparisons[name].verdict) for name in own}
        grew_at = [k for k, look in enumerate(history.looks, start=1) if arm in look.grow]
        settled = (grew_at[-1] + 1) if grew_at else 1
        if not history.complete:
            reason = f"round {len(history.looks) + 1} not finished"
        elif not own:
            reason = f"in no confirmatory comparison: the first {auto.first} seeds"
        elif not set(own) & set(last.unresolved):
            reason = f"resolved at look {settled} ({n} seeds)"
        else:
            reason = f"reached max_seeds={auto.max_seeds} unresolved"
        out[arm] = {"seeds": n, "reason": reason, "verdicts": verdicts}
    return out
