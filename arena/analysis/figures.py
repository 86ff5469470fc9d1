"""The paper's figures from the tidy and runs frames (matplotlib, Agg backend; PNG and PDF;
docs/design.md, Report). Looks (colours, sizes) are in figure_style.

Fig 3 (training dynamics: held-out greedy eval success first, then the training signals; a 2x3
grid) and Fig 4 (IS analysis; 1x3): one figure per env (per env and group above
MAX_ARMS_PER_FIGURE arms), one line per arm = the mean over seeds at each step (eval panels have
points only at eval steps); up to MAX_ARMS_WITH_BANDS arms, a band of mean ± std over seeds,
clipped to the metric's range:
    band(step) = clip(mean_s v_s(step) ± std_s v_s(step), lo, hi)   (ddof=0: one seed, no band)
Stability: one panel per env; each run's var_last20 by arm, its marker by status (stable,
unstable, unresolved, collapsed, no_format, failed, missing), the line theta and each run's binomial noise
floor p(1-p)/n_eval. Legends sit below the panels, outside every axes. Each function returns the
Figure (tests read its axes).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from arena.metric_keys import panel  # noqa: E402

from . import figure_style as S  # noqa: E402

# The plotted metric keys; each panel is (key, title, y label, range) from the metrics
# glossary (arena.metric_keys.panel: a key not in the glossary fails here, at import).
FIG3_KEYS = ("eval/success_rate", "train/success_rate", "actor/off_policy_kl", "actor/kl_ref", "actor/grad_norm",
             "rollout/format_valid_ratio")
FIG4_KEYS = ("actor/clipfrac_pos_adv", "actor/clipfrac_neg_adv", "actor/masked_seqs")
FIG3_PANELS = tuple(panel(key) for key in FIG3_KEYS)
FIG4_PANELS = tuple(panel(key) for key in FIG4_KEYS)
X_LABEL = "step"
# status -> (legend label, marker, colour, filled)
STATUS_MARKERS = {
    "stable": ("stable", "o", "tab:blue", True),
    "unstable": ("unstable (var >= theta)", "X", "tab:orange", True),
    "unresolved": ("unresolved (window too short)", "o", "tab:purple", False),
    "collapsed": ("collapsed", "v", "tab:red", True),
    "no_format": ("no format (never format-valid)", "^", "tab:brown", False),
    "failed": ("failed (no value, at 0)", "x", "black", True),
    "missing": ("missing (no value, at 0)", "s", "grey", False),
}
PDF_METADATA = {"CreationDate": None, "Creator": None, "Producer": None}  # no timestamps: byte-identical
PNG_METADATA = {"Software": None}


def _ordered(arms: Sequence[str], arm_order: Optional[Sequence[str]]) -> list[str]:
    order = list(arm_order or [])
    return [a for a in order if a in set(arms)] + sorted(set(arms) - set(order))


def _group_of(frame: pd.DataFrame) -> dict[str, Optional[str]]:
    return frame.drop_duplicates("arm").set_index("arm")["group"].to_dict() if "group" in frame else {}


def _legend_below(fig: Figure, handles: list, labels: list[str]) -> None:
    """One legend for the figure, below every axes (constrained layout makes room for it)."""
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=S.legend_columns(labels), frameon=False)


def _dynamics(tidy: pd.DataFrame, env: str, panels, title: str, arm_order=None, baseline: Optional[str] = None,
              arms: Optional[Sequence[str]] = None, group_of: Optional[Mapping[str, Optional[str]]] = None) -> Figure:
    data = tidy[tidy["env"] == env]
    arms = _ordered(arms if arms is not None else data["arm"].unique(), arm_order)
    styles = S.arm_styles(arms, group_of if group_of is not None else _group_of(tidy), baseline)
    bands = len(arms) <= S.MAX_ARMS_WITH_BANDS
    rows_n = 1 if len(panels) <= 3 else 2
    cols_n = -(-len(panels) // rows_n)
    with plt.rc_context(S.FONT):
        fig, axes = plt.subplots(rows_n, cols_n, figsize=(S.PAPER_WIDTH_IN, 2.1 * rows_n + 0.35 + 0.16 * (1 + len(arms) // 5)),
                                 squeeze=False, layout="constrained")
        for ax, (metric, panel_title, ylabel, bounds) in zip(axes.flat, panels):
            rows = data[data["metric"] == metric]
            for arm in arms:
                per_step = rows[rows["arm"] == arm].groupby("step")["value"]
                if per_step.ngroups == 0:
                    continue
                mean = per_step.mean()  # [steps]
                ax.plot(mean.index, mean.to_numpy(), label=arm, zorder=3 if arm == baseline else 2, **styles[arm])
                if bands:
                    std = per_step.std(ddof=0).to_numpy()  # [steps]
                    low, high = S.clip_band(mean.to_numpy() - std, mean.to_numpy() + std, bounds)  # [steps], [steps]
                    ax.fill_between(mean.index, low, high, color=styles[arm]["color"], alpha=0.15, lw=0)
            if rows.empty:
                ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(panel_title)
            ax.set_xlabel(X_LABEL)
            ax.set_ylabel(ylabel)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
            low, high = ax.get_ylim()  # the axis, like the bands, stays inside the metric's range
            lo, hi = bounds
            ax.set_ylim(low if lo is None else max(low, lo), high if hi is None else min(high, hi))
        handles = [Line2D([], [], **styles[a]) for a in arms]
        logged = set(data["arm"])
        _legend_below(fig, handles, [a if a in logged else f"{a} (no runs)" for a in arms])
        spread = "mean over seeds ± sd" if bands else "mean over seeds"
        fig.suptitle(f"{title} — {env} ({spread})")
    return fig


def training_dynamics_figure(tidy: pd.DataFrame, env: str, *, arm_order: Optional[Sequence[str]] = None,
                             baseline: Optional[str] = None, arms: Optional[Sequence[str]] = None,
                             group_of: Optional[Mapping[str, Optional[str]]] = None) -> Figure:
    """Figure 3: success rate, off-policy KL, KL to ref, grad norm, format-valid ratio vs step."""
    return _dynamics(tidy, env, FIG3_PANELS, "Training dynamics", arm_order, baseline, arms, group_of)


def is_analysis_figure(tidy: pd.DataFrame, env: str, *, arm_order: Optional[Sequence[str]] = None,
                       baseline: Optional[str] = None, arms: Optional[Sequence[str]] = None,
                       group_of: Optional[Mapping[str, Optional[str]]] = None) -> Figure:
    """Figure 4: clip fraction by advantage sign, masked-sequence count vs step."""
    return _dynamics(tidy, env, FIG4_PANELS, "IS analysis", arm_order, baseline, arms, group_of)


def run_status(status: str, stable) -> str:
    """A run's key in STATUS_MARKERS: failed/missing/collapsed/no_format from its status, else its `stable`."""
    if status in ("failed", "missing", "collapsed", "no_format"):
        return status
    if isinstance(stable, (bool, np.bool_)):
        return "stable" if stable else "unstable"
    return "unresolved"


def stability_figure(runs: pd.DataFrame, *, arm_order: Optional[Sequence[str]] = None,
                     baseline: Optional[str] = None) -> Figure:
    """Per env: every run's var_last20 by arm, marked by status; theta (dashed); noise floors (ticks)."""
    envs = list(dict.fromkeys(runs["env"]))
    arms = _ordered(runs["arm"].unique(), arm_order)
    index = {a: i for i, a in enumerate(arms)}
    width = max(S.PAPER_WIDTH_IN, 0.45 * len(arms) * max(1, len(envs)))
    with plt.rc_context(S.FONT):
        fig, axes = plt.subplots(1, max(1, len(envs)), figsize=(width, 3.4), squeeze=False, layout="constrained")
        shown: dict[str, object] = {}
        for ax, env in zip(axes[0], envs):
            rows = runs[runs["env"] == env].sort_values(["arm", "seed"], kind="stable")
            rank = rows.groupby("arm").cumcount().to_numpy()  # [runs] seed rank inside its arm
            count = rows.groupby("arm")["seed"].transform("size").to_numpy()  # [runs]
            # x = arm index + a small offset per seed so the seeds of one arm do not overlap
            x = rows["arm"].map(index).to_numpy(dtype=float) + 0.18 * (rank - (count - 1) / 2)  # [runs]
            var = rows["var_last20"].to_numpy(dtype=float)  # [runs]
            keys = [run_status(s, st) for s, st in zip(rows["status"], rows["stable"])]
            for key, (label, marker, colour, filled) in STATUS_MARKERS.items():
                sel = np.array([k == key for k in keys], dtype=bool)  # [runs]
                if not sel.any():
                    continue
                y = np.where(np.isfinite(var[sel]), var[sel], 0.0)  # [selected]; no value: at 0
                # a line marker (x) has no face: they take `color`; the others a face and an edge
                paint = {"color": colour} if marker == "x" else {"facecolors": colour if filled else "none", "edgecolors": colour}
                shown[label] = ax.scatter(x[sel], y, s=22, marker=marker, zorder=3, label=label, linewidths=1.0, **paint)
            floor = rows["noise_floor"].to_numpy(dtype=float)  # [runs]
            ok = np.isfinite(floor)  # [runs]
            if ok.any():
                shown["noise floor p(1-p)/n"] = ax.scatter(x[ok], floor[ok], marker="_", s=60, color="grey", zorder=2)
            thetas = sorted(np.asarray(rows["theta"].dropna().unique(), dtype=float))  # [distinct thetas]
            for theta in thetas:
                shown["theta"] = ax.axhline(theta, ls="--", color="red", lw=1)
            ax.set_xticks(range(len(arms)), arms, rotation=45, ha="right")
            for label in ax.get_xticklabels():
                label.set_fontweight("bold" if label.get_text() == baseline else "normal")
            ax.set_xlim(-0.6, len(arms) - 0.4)
            ax.set_yscale("symlog", linthresh=1e-5)
            values = np.concatenate([var, floor, thetas])
            values = values[np.isfinite(values)]  # [points]
            ax.set_ylim(0, 3 * values.max() if values.size and values.max() > 0 else 1e-2)
            ax.set_title(env)
            ax.set_xlabel("arm")
            ax.set_ylabel("var_last20")
        order = [label for label, *_ in STATUS_MARKERS.values()] + ["theta", "noise floor p(1-p)/n"]
        labels = sorted(shown, key=order.index)  # statuses first, in one fixed order
        _legend_below(fig, [shown[k] for k in labels], labels)
        fig.suptitle("Stability: var_last20 of each run vs theta")
    return fig


def _save(fig: Figure, out: Path, stem: str) -> None:
    fig.savefig(out / f"{stem}.png", dpi=150, metadata=PNG_METADATA)
    fig.set_layout_engine("none")  # keep the layout the PNG got; do not solve it again for the PDF
    fig.savefig(out / f"{stem}.pdf", metadata=PDF_METADATA)
    plt.close(fig)


def write_figures(tidy: pd.DataFrame, runs: pd.DataFrame, out: str | Path, *, arm_order: Optional[Sequence[str]] = None,
                  baseline: Optional[str] = None) -> list[Path]:
    """fig3_<env>[_<group>], fig4_<env>[_<group>] and stability, as PNG and PDF under `out`;
    returns the PNG paths. Above MAX_ARMS_PER_FIGURE arms, one fig3/fig4 per group (with the baseline)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    arms = _ordered(runs["arm"].unique(), arm_order)
    group_of = _group_of(runs)  # from the runs: an arm with no metrics still gets its group's hue
    sets = S.group_sets(arms, group_of, baseline)
    stems = []
    with plt.rc_context({"svg.hashsalt": "arena", "pdf.compression": 6}):
        for env in dict.fromkeys(runs["env"]):
            for label, members in sets:
                suffix = f"_{label}" if label else ""
                for kind, draw in (("fig3", training_dynamics_figure), ("fig4", is_analysis_figure)):
                    fig = draw(tidy, env, arm_order=arm_order, baseline=baseline, arms=members, group_of=group_of)
                    _save(fig, out, f"{kind}_{env}{suffix}")
                    stems.append(f"{kind}_{env}{suffix}")
        _save(stability_figure(runs, arm_order=arm_order, baseline=baseline), out, "stability")
    return [out / f"{s}.png" for s in stems + ["stability"]]

