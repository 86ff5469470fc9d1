"""summary.json, the proof that a run finished (docs/design.md §F), built the same way by every
backend from its eval points and metrics rows."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from .provenance import provenance
from .stability import stability


def build_summary(
    *,
    status: str,
    cell_id: str,
    points: Sequence[tuple[int, float]],
    history: Sequence[dict],
    total_steps: int,
    theta: float,
    min_points: int,
    n_eval: int,
    wall_seconds: float,
    collapse_reason: Optional[str] = None,
    **extra: Any,
) -> dict:
    stab = stability(points, total_steps, theta=theta, min_points=min_points, n_eval=n_eval)
    return {
        "status": status,
        "kind": "train",  # a training run's (layout.SUMMARY_FIELDS_BY_KIND); an older one without it reads as train
        "collapse_reason": collapse_reason,
        "cell_id": cell_id,
        "final_eval_success": points[-1][1] if points else None,
        "initial_eval_success": points[0][1] if points else None,
        "var_last20": stab["var_last20"],
        "noise_floor": stab["noise_floor"],
        "theta": stab["theta"],
        "stable": False if status in ("collapsed", "no_format") else stab["stable"],
        "stability_warning": stab["warning"],
        "n_eval": n_eval,
        "steps": max((r["step"] for r in history), default=0),
        "wall_seconds": wall_seconds,
        **extra,
        **provenance(),
    }


def paired_gain_se(wins_before: Sequence[int], wins_after: Sequence[int]) -> Optional[float]:
    """The standard error of p_after - p_before when both evals played the same n episodes:
        d_i = after_i - before_i in {-1, 0, 1},  SE = sd(d) / sqrt(n)  (sd with n - 1)
    Most of an episode's difficulty is shared by the two policies and cancels in d_i, so this is
    at most, and usually well below, the two-sample sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n).
    None unless both hold the same n >= 2 episodes."""
    n = len(wins_before)
    if n < 2 or len(wins_after) != n:
        return None
    d = [a - b for a, b in zip(wins_after, wins_before)]
    mean = sum(d) / n
    return math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
