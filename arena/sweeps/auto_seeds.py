"""`seeds=auto`: how many seeds each arm gets, decided in rounds from the results so far
(docs/design.md, Sweep: seeds=auto). Everything here is pure: the sweep (auto_sweep.py) reads
the scores from disk and runs the cells this module asks for.

The procedure
  round 1   every arm runs seeds 0 .. first-1 (first = min(FIRST_SEEDS, max_seeds));
  look r    when every cell of round r has finished, the comparisons are judged by the one
            verdict rule (arena.analysis.verdicts.compare_family) at the per-look level
            alpha' = verdicts.alpha_per_look(looks):
              - arm vs baseline: d_s = final_s(arm) - final_s(baseline), one family (Holm);
              - gain over the start: g_s = final_s - start_s of the same run, another family;
            (points; with several envs d_s and g_s are the mean over envs of seed s, so the
            seed stays the unit). An arm is unresolved while one of its comparisons is
            "underpowered";
  round r+1 each unresolved arm below max_seeds gets the next seed (its seeds stay 0 .. n-1);
            the baseline gets one whenever an arm with as many seeds as it gets one (a paired
            difference needs both runs of a seed), and for its own unresolved gain (grow_mask);
  stop      when no arm gets a seed: each arm is resolved or at max_seeds.

Error control under any stopping rule (a union bound, needing no independence): one
comparison's sample size takes at most looks = max_seeds - first + 1 values (first .. max_seeds).
Holm's procedure, whatever p-values it is given, rejects a true null only if the smallest
true-null p-value is below alpha'/m0 (m0 true nulls in the family). So
    P(a false "better"/"worse" in a family at the end)
      <= sum over the m0 true nulls and the `looks` possible sample sizes n of
         P(p_n <= alpha'/m0) = m0 * looks * alpha'/m0 = looks * alpha' = alpha,
where p_n is the fixed-n paired t-test of the first n seeds (valid at each fixed n). The
report judges the final data at the same alpha' (the manifest records it), so its verdicts
carry this guarantee. Bonferroni over the looks is conservative next to group-sequential
spending bounds, which need a fixed look schedule that per-arm stopping does not have.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

FIRST_SEEDS = 3  # seeds every arm runs before the first look (fewer when max_seeds is smaller)
DEFAULT_MAX_SEEDS = 10  # max_seeds when seeds=auto comes without one
DIFF, GAIN = "vs baseline", "gain"


@dataclass(frozen=True)
class AutoSeeds:
    """The sweep's seeds=auto settings; alpha is the per-look level every verdict uses."""
    max_seeds: int
    min_effect: float

    @property
    def first(self) -> int:
        return min(FIRST_SEEDS, self.max_seeds)

    @property
    def looks(self) -> int:
        # the sample sizes a comparison can end at: first, first + 1, ..., max_seeds
        return self.max_seeds - self.first + 1

    @property
    def alpha(self) -> float:
        # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
        from arena.analysis.verdicts import alpha_per_look

        return alpha_per_look(self.looks)

    def record(self) -> dict[str, Any]:
        """What the manifest keeps (the report judges the final data at this alpha)."""
        return {"max_seeds": self.max_seeds, "first_seeds": self.first, "looks": self.looks,
                "alpha": self.alpha, "min_effect": self.min_effect}


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


def grow_mask(unresolved: np.ndarray, counts: np.ndarray, baseline: Optional[int], max_seeds: int) -> np.ndarray:
    """Which arms get the next seed; arrays [..., k] over the k arms (simulations stack on the left).
        grow_a        = unresolved_a and counts_a < max_seeds                       (a != baseline)
        grow_baseline = (unresolved_b and counts_b < max_seeds)
                        or any over a of (grow_a and counts_a == counts_b)
    Every arm's seeds are 0 .. counts - 1, so the baseline has every seed of an arm as long as
    counts_b >= counts_a; it holds at the start and each round keeps it (an arm that catches up
    with the baseline takes it along). So the baseline stays within max_seeds too."""
    unresolved = np.asarray(unresolved, dtype=bool)  # [..., k]
    counts = np.asarray(counts)  # [..., k]
    grow = unresolved & (counts < max_seeds)  # [..., k]
    if baseline is not None:
        catches_up = grow & (counts == counts[..., baseline:baseline + 1])  # [..., k]
        grow[..., baseline] |= np.delete(catches_up, baseline, axis=-1).any(axis=-1)
    return grow


@dataclass
class Decision:
    """One look: every comparison's Comparison, the unresolved arms, the arms that grow."""
    counts: dict[str, int]
    comparisons: dict[str, dict[str, Any]]  # arm -> {DIFF: Comparison (not for the baseline), GAIN: Comparison}
    unresolved: list[str]
    grow: list[str]


def decide(diffs: Mapping[str, Sequence[float]], gains: Mapping[str, Sequence[float]], counts: Mapping[str, int],
           baseline: Optional[str], auto: AutoSeeds) -> Decision:
    """One look: the verdicts of both families at auto.alpha, then grow_mask. `diffs` holds
    every arm but the baseline, `gains` every arm, `counts` every arm's seeds so far (in order)."""
    # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
    from arena.analysis.verdicts import UNDERPOWERED, compare_family

    arms = list(counts)
    per_family = {DIFF: compare_family(diffs, min_effect=auto.min_effect, alpha=auto.alpha) if diffs else {},
                  GAIN: compare_family(gains, min_effect=auto.min_effect, alpha=auto.alpha) if gains else {}}
    comparisons = {a: {fam: per_family[fam][a] for fam in (DIFF, GAIN) if a in per_family[fam]} for a in arms}
    unresolved = [a for a in arms if any(c.verdict == UNDERPOWERED for c in comparisons[a].values())]
    mask = grow_mask(np.array([a in unresolved for a in arms]), np.array([counts[a] for a in arms]),
                     arms.index(baseline) if baseline in arms else None, auto.max_seeds)
    return Decision(counts=dict(counts), comparisons=comparisons, unresolved=unresolved,
                    grow=[a for a, g in zip(arms, mask) if g])


# (final points, start points) of one arm's seed (the mean over envs), or None while unfinished
Scores = Callable[[str, int], Optional[tuple[float, float]]]


@dataclass
class History:
    """The rounds so far, replayed from the scores on disk: `counts` is the current round's
    seeds per arm; `complete` when the last look grew no arm (the sweep is finished)."""
    counts: dict[str, int]
    looks: list[Decision] = field(default_factory=list)
    complete: bool = False


def replay(arms: Sequence[str], baseline: Optional[str], auto: AutoSeeds, scores: Scores) -> History:
    """Every look whose cells have all finished, from round 1: the same scores give the same
    decisions, so a rerun (or a resumed sweep) reaches the rounds it had reached, and the one
    it was in. A look reads only the seeds of its own round."""
    counts = {a: auto.first for a in arms}
    history = History(counts=counts)
    while True:
        got = {a: [scores(a, s) for s in range(counts[a])] for a in arms}
        if any(x is None for row in got.values() for x in row):
            return history  # this round still has cells to run
        # points: d_s = final_s(arm) - final_s(baseline); g_s = final_s - start_s
        gains = {a: [f - s for f, s in got[a]] for a in arms}
        diffs = {a: [f - got[baseline][s][0] for s, (f, _) in enumerate(got[a])]
                 for a in arms if baseline is not None and a != baseline}
        decision = decide(diffs, gains, counts, baseline, auto)
        history.looks.append(decision)
        if not decision.grow:
            history.complete = True
            return history
        counts = {a: counts[a] + (a in decision.grow) for a in arms}
        history.counts = counts


def seed_reasons(history: History, auto: AutoSeeds, baseline: Optional[str]) -> dict[str, dict[str, Any]]:
    """arm -> {"seeds": n, "reason": why it has n seeds, "verdicts": {family: verdict}} after
    the last look. "resolved at look k" names the look after which the arm got no more seeds;
    the baseline's reason also says when it kept pace with the arms compared with it."""
    if not history.looks:
        return {a: {"seeds": n, "reason": "round 1 not finished", "verdicts": {}} for a, n in history.counts.items()}
    last = history.looks[-1]
    out = {}
    for arm, n in history.counts.items():
        verdicts = {fam: c.verdict for fam, c in last.comparisons[arm].items()}
        grew_at = [k for k, look in enumerate(history.looks, start=1) if arm in look.grow]
        settled = (grew_at[-1] + 1) if grew_at else 1
        if not history.complete:
            reason = f"round {len(history.looks) + 1} not finished"
        elif arm not in last.unresolved:
            reason = f"resolved at look {settled} ({n} seeds)"
        elif arm in last.unresolved and n >= auto.max_seeds:
            reason = f"reached max_seeds={auto.max_seeds} unresolved"
        else:  # the baseline at max with its own comparisons resolved is covered above
            reason = f"stopped at look {settled}"
        if arm == baseline and history.complete and grew_at and arm not in history.looks[grew_at[-1] - 1].unresolved:
            reason += "; the baseline runs every seed an arm compared with it runs"
        out[arm] = {"seeds": n, "reason": reason, "verdicts": verdicts}
    return out
