"""Stability and collapse (docs/design.md §E).

Eval points: step 0 (the starting BC policy), every `test_freq` steps, and every step inside
the final window. The window is the eval points with step >= 0.8*T.
    var_last20 = population variance of eval success over the window
    stable     = var_last20 < theta, or "unresolved" if the window has < min_points points
    noise_floor = p(1-p)/n_eval with p the window's mean success (binomial variance of one point)
Collapse (a run that had learned something and lost it; docs/design.md §E), the first of:
  1. a non-finite loss or grad_norm;
  2. grad_norm > 10x the running median of the earlier grad norms (after 3 of them);
  3. rollout format_valid_ratio < min_format_valid after the first 10% of steps, in a run whose
     format-valid ratio (rollout or eval) had earlier been >= min_format_valid;
  4. eval success s_t <= best/2, where best = max eval success so far (before t), once
     best - s_0 >= 2 SE with SE = sqrt(s_0(1-s_0)/n + best(1-best)/n) (two-sample binomial SE
     on n = n_eval episodes) and best > s_0: a real rise, then a fall to half.
A run that never had the format (no rollout or eval format-valid ratio >= min_format_valid, e.g.
one from a random init) has not collapsed: its status is `no_format`.
"""
from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

UNRESOLVED = "unresolved"


def eval_steps(total_steps: int, test_freq: int, *, final_window: bool = True) -> list[int]:
    """The steps at which a run evaluates: 0, every test_freq, and every step in the last 20%
    (final_window) or only the last step (not final_window: a run that needs its start and end
    alone, such as a learning test; its stability is then judged on fewer window points)."""
    window_start = math.ceil(0.8 * total_steps) if final_window else total_steps
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


FORMAT_KEYS = ("rollout/format_valid_ratio", "eval/format_valid_ratio")


def collapse_reason(history: Sequence[dict], total_steps: int, *, n_eval: Optional[int] = None,
                    min_format_valid: float = 0.5) -> Optional[str]:
    """The first collapse condition met by the metrics rows so far, or None. Rule 4 (the eval
    fall) needs n_eval, the eval episodes per point; without it that rule is not applied."""
    grad_norms: list[float] = []
    had_format = False
    s0: Optional[float] = None  # step-0 eval success
    best: Optional[float] = None  # best eval success before this row
    for row in history:
        step = row["step"]
        loss = row.get("actor/pg_loss")
        if loss is not None and not _finite(loss):
            return f"non-finite loss at step {step}"
        g = row.get("actor/grad_norm")
        if g is not None:
            if not _finite(g):
                return f"non-finite grad_norm at step {step}"
            if len(grad_norms) >= 3 and g > 10 * statistics.median(grad_norms):
                return f"grad_norm {g:.3g} > 10x its running median {statistics.median(grad_norms):.3g} at step {step}"
            grad_norms.append(float(g))
        fmt = row.get("rollout/format_valid_ratio")
        if fmt is not None and had_format and step > 0.1 * total_steps and fmt < min_format_valid:
            return f"format_valid_ratio {fmt:.2f} < {min_format_valid:g} at step {step}"
        success = row.get("eval/success_rate")
        if success is not None and _finite(success) and n_eval:
            success = float(success)
            if s0 is None:
                s0 = success
            elif best is not None and _real_rise(s0, best, n_eval) and success <= best / 2:
                return f"eval success {success:.3f} <= half its best {best:.3f} (step 0: {s0:.3f}) at step {step}"
            best = success if best is None else max(best, success)
        had_format = had_format or any(_finite(row.get(k)) and float(row[k]) >= min_format_valid for k in FORMAT_KEYS)
    return None


def run_status(history: Sequence[dict], reason: Optional[str], *, min_format_valid: float = 0.5) -> str:
    """summary.json's status: `collapsed` (a collapse rule fired), `no_format` (format ratios were
    logged and none reached min_format_valid: the run never had the format, so it could not
    collapse), else `done`."""
    if reason is not None:
        return "collapsed"
    ratios = [float(r[k]) for r in history for k in FORMAT_KEYS if _finite(r.get(k))]
    # no format ratio logged at all: nothing says the format was missing
    return "no_format" if ratios and max(ratios) < min_format_valid else "done"


SMOKE_NOTE = (" (expected at budget=smoke: a few steps on a tiny batch train nothing, so the collapse and format "
              "flags mean nothing at this size)")


def smoke_note(budget, status: str = "collapsed") -> str:
    """What a `collapsed` or `no_format` line adds at budget=smoke, where those flags are expected
    and meaningless; "" otherwise."""
    return SMOKE_NOTE if budget == "smoke" and status in ("collapsed", "no_format") else ""


def _real_rise(s0: float, best: float, n: int) -> bool:
    """best - s0 >= 2 SE, SE = sqrt(s0(1-s0)/n + best(1-best)/n), and best > s0."""
    se = math.sqrt(s0 * (1 - s0) / n + best * (1 - best) / n)
    return best > s0 and best - s0 >= 2 * se


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False
