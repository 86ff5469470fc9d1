"""A finding's verdict against the paper (`vs paper` of `arena findings`): the direction, and where
the paper's text gives both numbers ("34.03 vs 46.16"), whether its difference in points lies in
the interval."""
from __future__ import annotations

import math
import re
from typing import Optional

from . import measures, verdicts
from .claims import Claim

PAPER_POINTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+vs\s+(\d+(?:\.\d+)?)\b")  # "34.03 vs 46.16 (average)"


def agreement(verdict: str, sign: Optional[int]) -> str:
    """The verdict against the paper's direction: agrees / opposite / not found / unresolved."""
    if sign is None:
        return "-"
    if verdict == verdicts.UNDERPOWERED:
        return "unresolved"
    if verdict == verdicts.NO_DIFFERENCE:
        return "not found"
    return "agrees" if (verdict == verdicts.BETTER) == (sign > 0) else "opposite"


def paper_points(paper: str) -> Optional[float]:
    """The paper's difference in points where its text gives both numbers ("34.03 vs 46.16" ->
    -12.13); None where it gives a relative change or a direction only."""
    match = PAPER_POINTS.match(paper)
    return float(match.group(1)) - float(match.group(2)) if match else None


def paper_in_interval(points: Optional[float], low: float, high: float) -> Optional[bool]:
    """Whether the paper's difference lies in the interval; None without a number or a finite interval."""
    if points is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return bool(low <= points <= high)


def vs_paper(verdict: str, sign: Optional[int], points: Optional[float], inside: Optional[bool]) -> str:
    """The direction (`agreement`) and, where the paper gives a number in points, whether it lies in the interval."""
    direction = agreement(verdict, sign)
    if inside is None:
        return direction
    return f"{direction}; paper's {points:+.1f} {'inside' if inside else 'outside'} the interval"



def paper_columns(claim: Claim, c: "verdicts.Comparison", confirmed: bool = True) -> dict:
    """vs_paper (direction, and the paper's number against the interval), paper_points, paper_in_interval.
    A better/worse that the mixture-null rule does not confirm counts as unresolved against the paper
    (docs/methods.md §14); the paper's numbers are final successes, so only a finding measured on
    `final` is held against them."""
    verdict = c.verdict if confirmed or c.verdict in (verdicts.NO_DIFFERENCE, verdicts.UNDERPOWERED) \
        else verdicts.UNDERPOWERED
    points = paper_points(claim.paper) if claim.measure == measures.FINAL else None
    inside = paper_in_interval(points, c.low, c.high)
    return {"vs_paper": vs_paper(verdict, claim.sign, points, inside), "paper_points": points,
            "paper_in_interval": "" if inside is None else ("yes" if inside else "no")}
