"""How the report's figures look (docs/design.md, Report): one line style per arm, sized for a
paper column.

Colour rule: the baseline arm is black and solid; every other arm takes its preset group's hue
(GROUP_COLORMAPS) and, inside a group, the k-th arm gets shade k of that hue and line style
k mod 4, so two arms of one group differ in both and two groups never share a hue.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import matplotlib
import numpy as np

from arena.po.methods import GROUPS

PAPER_WIDTH_IN = 7.0  # a two-column paper's text width
FONT = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
        "legend.fontsize": 7, "figure.titlesize": 9}
GROUP_COLORMAPS = {"baseline": "Greys", "aggregation": "Purples", "clipping": "Blues", "filtering": "Greens",
                   "advantage": "Oranges", "combined": "Reds"}
OTHER_COLORMAP = "YlOrBr"
LINE_STYLES = ("-", "--", ":", "-.")
BASELINE_STYLE = {"color": "black", "ls": "-", "lw": 1.8}
MAX_ARMS_PER_FIGURE = 8  # above this, write_figures draws one figure per group (plus the baseline)
MAX_ARMS_WITH_BANDS = 4  # above this, seed bands would merge into one mass: lines only


def arm_styles(arms: Sequence[str], group_of: Mapping[str, Optional[str]], baseline: Optional[str]) -> dict[str, dict]:
    """arm -> matplotlib line kwargs (color, ls, lw) by the colour rule above."""
    styles: dict[str, dict] = {}
    by_group: dict[str, list[str]] = {}
    for arm in arms:
        if arm == baseline:
            styles[arm] = dict(BASELINE_STYLE)
        else:
            by_group.setdefault(group_of.get(arm) or "other", []).append(arm)
    for group, members in by_group.items():
        cmap = matplotlib.colormaps[GROUP_COLORMAPS.get(group, OTHER_COLORMAP)]
        # shade s_k in [0.45, 0.95] of the colormap, darkest first; one arm: 0.75
        shades = np.linspace(0.95, 0.45, len(members)) if len(members) > 1 else np.array([0.75])  # [k]
        for k, arm in enumerate(members):
            styles[arm] = {"color": cmap(float(shades[k])), "ls": LINE_STYLES[k % len(LINE_STYLES)], "lw": 1.2}
    return styles


def group_sets(arms: Sequence[str], group_of: Mapping[str, Optional[str]], baseline: Optional[str]) -> list[tuple[str, list[str]]]:
    """(label, arms) per figure: all arms in one when they fit, else one per group with the
    baseline prepended (the baseline's own group keeps its other arms)."""
    if len(arms) <= MAX_ARMS_PER_FIGURE:
        return [("", list(arms))]
    order = {g: i for i, g in enumerate(GROUPS)}
    groups = sorted({group_of.get(a) or "other" for a in arms if a != baseline}, key=lambda g: (order.get(g, len(GROUPS)), g))
    sets = []
    for group in groups:
        members = [a for a in arms if a != baseline and (group_of.get(a) or "other") == group]
        sets.append((group, ([baseline] if baseline in arms else []) + members))
    return sets


def clip_band(low: np.ndarray, high: np.ndarray, bounds: tuple[Optional[float], Optional[float]]) -> tuple[np.ndarray, np.ndarray]:
    """A band never leaves the metric's range: low, high clipped to [lo, hi] (None = open)."""
    lo, hi = bounds
    if lo is None and hi is None:
        return low, high
    return np.clip(low, lo, hi), np.clip(high, lo, hi)  # [steps], [steps]


def legend_columns(labels: Sequence[str]) -> int:
    """Columns of a legend below the panels: as many as fit across a 7-inch figure, at most 5.
    One column takes about 0.06 in per character at 7 pt plus 0.5 in for the line sample."""
    width = 0.06 * max((len(t) for t in labels), default=1) + 0.5  # inches per column
    return max(1, min(5, len(labels), int(PAPER_WIDTH_IN * 0.95 // width)))
