"""seeds=auto simulated (auto_seeds.py's procedure, vectorised over many sweeps): its false-verdict rate
under no effect and its power, for tests/sweeps/test_auto_seeds.py and analysis/sim_auto_seeds.py.

Model. Arm a's score on seed s, in points: x_{a,s} = mu_a + e_{a,s}, e ~ N(0, sd^2 / 2) independent, so
each paired difference x_{a,s} - x_{b,s} has sd `sd` (comparisons that share an arm are correlated, as
in a sweep). A look judges each family with the rule's vectorised form (verdicts.family_verdicts) on the
first m_c seeds of each comparison, m_c = min(n_arm, n_baseline); the arms grow_mask picks get a seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .auto_seeds import FIRST_SEEDS, grow_mask

# is_clipping's confirmatory families (findings.yaml): (family, arm, baseline) over ARMS
ARMS = ("grpo", "gspo", "cispo", "sapo", "cispo_sm", "sapo_sm")
CLIPPING = (("F1", "cispo", "grpo"), ("F1", "sapo", "grpo"), ("F2", "cispo_sm", "cispo"), ("F2", "sapo_sm", "sapo"),
            ("GSPO", "gspo", "grpo"))


@dataclass
class Outcome:
    """Per simulated sweep: each comparison's final verdict [S, C], seeds per arm [S, A]."""
    verdicts: np.ndarray
    counts: np.ndarray
    families: tuple[str, ...]

    def family_error(self, true_null: Sequence[bool]) -> dict[str, float]:
        """Per family: the share of sweeps with a better/worse on a true-null member."""
        # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
        from arena.analysis.verdicts import BETTER, WORSE

        wrong = np.isin(self.verdicts, (BETTER, WORSE)) & np.asarray(true_null)  # [S, C]
        fams = np.array(self.families)
        return {f: float(wrong[:, fams == f].any(axis=1).mean()) for f in dict.fromkeys(self.families)}

    def power(self, sign: Sequence[int]) -> np.ndarray:
        """Per comparison: the share of sweeps whose verdict is better (sign +1) or worse (-1)."""
        # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
        from arena.analysis.verdicts import BETTER, WORSE

        want = np.where(np.asarray(sign) > 0, BETTER, WORSE)  # [C]
        return (self.verdicts == want).mean(axis=0)


def _masked(d: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd (ddof 1) of the first m[...] values of d[..., M]."""
    keep = np.arange(d.shape[-1]) < m[..., None]  # [..., M]
    mean = (d * keep).sum(-1) / m  # [...]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt((((d - mean[..., None]) * keep) ** 2).sum(-1) / (m - 1))  # [...]
    return mean, sd


def simulate(mu: Sequence[float], *, sd: float, max_seeds: int, n_sweeps: int, seed: int = 0,
             comparisons: Sequence[tuple[str, str, str]] = CLIPPING, arms: Sequence[str] = ARMS,
             min_effect: float = 5.0, bound: Optional[object] = None, alpha: float = 0.05) -> Outcome:
    """seeds=auto on n_sweeps sweeps with arm means mu (points). `bound`: the group-sequential bound
    (sequential.SpendingBound; None judges every look at `alpha`, e.g. the old 0.05 / looks)."""
    # lazy: keeps omegaconf, pandas, scipy, torch out of this module's import
    from arena.analysis.verdicts import UNDERPOWERED, family_verdicts

    rng = np.random.default_rng(seed)
    x = np.asarray(mu, float)[None, :, None] + rng.normal(0, sd / np.sqrt(2), (n_sweeps, len(arms), max_seeds))  # [S, A, M]
    ends = np.array([[arms.index(a), arms.index(b)] for _, a, b in comparisons])  # [C, 2]
    d = x[:, ends[:, 0], :] - x[:, ends[:, 1], :]  # [S, C, M]
    families = tuple(f for f, _, _ in comparisons)
    counts = np.full((n_sweeps, len(arms)), min(FIRST_SEEDS, max_seeds))  # [S, A]
    verdicts = np.empty((n_sweeps, len(comparisons)), dtype=object)  # [S, C]
    while True:
        m = np.minimum(counts[:, ends[:, 0]], counts[:, ends[:, 1]])  # [S, C]
        mean, spread = _masked(d, m)  # [S, C] each
        for f in dict.fromkeys(families):
            cols = [i for i, g in enumerate(families) if g == f]
            verdicts[:, cols] = family_verdicts(mean[:, cols], spread[:, cols], m[:, cols], min_effect=min_effect,
                                                alpha=alpha, bound=bound)["verdict"]
        grow = grow_mask(verdicts == UNDERPOWERED, ends, counts, max_seeds)  # [S, A]
        if not grow.any():
            return Outcome(verdicts.astype(str), counts, families)
        counts = counts + grow
