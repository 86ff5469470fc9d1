"""Stability and collapse (decisions.md §E).

Eval points: step 0 (the starting BC policy), every `test_freq` steps, and every step inside
the final window. The window is the eval points with step >= 0.8*T.
    var_last20 = population variance of eval success over the window
    stable     = var_last20 < theta, or "unresolved" if the window has < min_points points
    noise_floor = p(1-p)/n_eval with p the window's mean success (binomial variance of one point)
Collapse: a non-finite loss, or grad_norm > 10x its running median, or format_valid_ratio < 0.5
after the first 10% of steps.
"""
from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

UNRESOLVED = "unresolved"


def eval_steps(total_steps: int, test_freq: int) -> list[int]:
    """The steps at which a run evaluates: 0, every test_freq, every step in the last 20%."""
    window_start = math.ceil(0.8 * total_steps)
    steps = set(range(0, total_steps + 1, max(1, test_freq))) | set(range(window_start, total_steps + 1))
    return sorted(steps)


def stability(points: Sequence[tuple[int, float]], total_steps: int, *, theta: float, min_points: int, n_eval: int) -> dict:
    """points: (step, eval success in [0, 1]). Returns the summary's stability fields."""
    window = [s for step, s in points if step >= 0.8 * total_steps]
    out = {"theta": theta, "window_points": len(window), "var_last20": None, "noise_floor": None, "stable": UNRESOLVED, "warning": None}
    if window:
        p = statistics.fmean(window)
        # population variance: mean of squared deviations
        out["var_last20"] = statistics.pvariance(window)
        out["noise_floor"] = p * (1 - p) / max(1, n_eval)
        if theta < out["noise_floor"]:
            out["warning"] = (
                f"theta={theta:g} is below the binomial noise floor {out['noise_floor']:.4g} "
                f"(p={p:.3f}, n_eval={n_eval}): a stable policy can still be flagged unstable"
            )
    if window and len(window) >= min_points:  # an empty window stays unresolved, whatever min_points
        out["stable"] = bool(out["var_last20"] < theta)
    return out


def collapse_reason(history: Sequence[dict], total_steps: int, *, min_format_valid: float = 0.5) -> Optional[str]:
    """The first collapse condition met by the metrics rows so far, or None."""
    grad_norms: list[float] = []
    for row in history:
        loss = row.get("actor/pg_loss")
        if loss is not None and not _finite(loss):
            return f"non-finite loss at step {row['step']}"
        g = row.get("actor/grad_norm")
        if g is not None:
            if not _finite(g):
                return f"non-finite grad_norm at step {row['step']}"
            if len(grad_norms) >= 3 and g > 10 * statistics.median(grad_norms):
                return f"grad_norm {g:.3g} > 10x its running median {statistics.median(grad_norms):.3g} at step {row['step']}"
            grad_norms.append(float(g))
        fmt = row.get("rollout/format_valid_ratio")
        if fmt is not None and row["step"] > 0.1 * total_steps and fmt < min_format_valid:
            return f"format_valid_ratio {fmt:.2f} < {min_format_valid:g} at step {row['step']}"
    return None


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False
