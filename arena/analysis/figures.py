"""The paper's figures from the tidy and runs frames (matplotlib, Agg backend; PNG and PDF).

Fig 3 (training dynamics: held-out greedy eval success first, then the training signals) and
Fig 4 (IS analysis): one figure per env, one line per arm = the mean over seeds at each step
(eval panels have points only at eval steps), with a band of mean ± std over seeds:
    band(step) = mean_s v_s(step) ± std_s v_s(step)   (ddof=0, so one seed gives a zero band)
Stability: one panel per env; each run's var_last20 against the arm, the line theta, and each
run's binomial noise floor p(1-p)/n_eval. Each function returns the Figure (tests read its axes).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# (metric key, panel title, y label)
FIG3_PANELS = (
    ("eval/success_rate", "Eval success (greedy)", "success rate"),
    ("train/success_rate", "Train success (sampled)", "success rate"),
    ("actor/off_policy_kl", "Off-policy KL", "KL(old || current)"),
    ("actor/kl_ref", "KL to reference", "KL to ref"),
    ("actor/grad_norm", "Grad norm", "grad norm"),
    ("rollout/format_valid_ratio", "Format-valid ratio", "format-valid ratio"),
)
FIG4_PANELS = (
    ("actor/clipfrac_pos_adv", "Clip fraction, A > 0", "clip fraction"),
    ("actor/clipfrac_neg_adv", "Clip fraction, A < 0", "clip fraction"),
    ("actor/masked_seqs", "Masked sequences", "masked sequences"),
)
X_LABEL = "step"
PDF_METADATA = {"CreationDate": None, "Creator": None, "Producer": None}  # no timestamps: byte-identical
PNG_METADATA = {"Software": None}


def _ordered(arms: Sequence[str], arm_order: Optional[Sequence[str]]) -> list[str]:
    order = list(arm_order or [])
    return [a for a in order if a in set(arms)] + sorted(set(arms) - set(order))


def _dynamics(tidy: pd.DataFrame, env: str, panels, title: str, arm_order=None) -> Figure:
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.8), squeeze=False)
    data = tidy[tidy["env"] == env]
    arms = _ordered(data["arm"].unique(), arm_order)
    palette = plt.get_cmap("tab10" if len(arms) <= 10 else "tab20")  # no colour shared by two arms up to 20
    colours = {a: palette(i % palette.N) for i, a in enumerate(arms)}
    for ax, (metric, panel_title, ylabel) in zip(axes[0], panels):
        rows = data[data["metric"] == metric]
        for arm in arms:
            per_step = rows[rows["arm"] == arm].groupby("step")["value"]
            if per_step.ngroups == 0:
                continue
            mean = per_step.mean()  # [steps]
            std = per_step.std(ddof=0)  # [steps]
            ax.plot(mean.index, mean.to_numpy(), label=arm, color=colours[arm], lw=1.2)
            ax.fill_between(mean.index, (mean - std).to_numpy(), (mean + std).to_numpy(), color=colours[arm], alpha=0.2, lw=0)
        if rows.empty:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(panel_title, fontsize=9)
        ax.set_xlabel(X_LABEL)
        ax.set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:  # one legend column per 8 arms, right of the panels (never over the axis labels)
        fig.legend(handles, labels, loc="center right", ncol=1 + (len(labels) - 1) // 8, fontsize=8, frameon=False)
    fig.suptitle(f"{title} — {env}", fontsize=10)
    legend_width = 0.07 * (1 + (len(labels) - 1) // 8) if handles else 0.0
    fig.subplots_adjust(left=0.06, right=0.99 - legend_width, bottom=0.18, top=0.82, wspace=0.45)  # fixed: tight_layout is slow
    return fig


def training_dynamics_figure(tidy: pd.DataFrame, env: str, *, arm_order: Optional[Sequence[str]] = None) -> Figure:
    """Figure 3: success rate, off-policy KL, KL to ref, grad norm, format-valid ratio vs step."""
    return _dynamics(tidy, env, FIG3_PANELS, "Training dynamics", arm_order)


def is_analysis_figure(tidy: pd.DataFrame, env: str, *, arm_order: Optional[Sequence[str]] = None) -> Figure:
    """Figure 4: clip fraction by advantage sign, masked-sequence count vs step."""
    return _dynamics(tidy, env, FIG4_PANELS, "IS analysis", arm_order)


def stability_figure(runs: pd.DataFrame, *, arm_order: Optional[Sequence[str]] = None) -> Figure:
    """Per env: each finished run's var_last20 by arm (dots), theta (dashed), noise floors (ticks)."""
    finished = runs[runs["status"].isin(("done", "collapsed"))]
    envs = list(dict.fromkeys(runs["env"]))
    arms = _ordered(runs["arm"].unique(), arm_order)
    fig, axes = plt.subplots(1, max(1, len(envs)), figsize=(3.6 * max(1, len(envs)), 3.0), squeeze=False)
    for ax, env in zip(axes[0], envs):
        rows = finished[finished["env"] == env]
        x = rows["arm"].map({a: i for i, a in enumerate(arms)}).to_numpy(dtype=float)  # [runs]
        ax.scatter(x, rows["var_last20"].to_numpy(dtype=float), s=14, label="var_last20", zorder=3)
        ax.scatter(x, rows["noise_floor"].to_numpy(dtype=float), marker="_", s=80, color="grey", label="noise floor")
        thetas = np.asarray(rows["theta"].dropna().unique(), dtype=float)  # [distinct thetas]
        for theta in sorted(thetas):
            ax.axhline(theta, ls="--", color="red", lw=1, label="theta")
        ax.set_xticks(range(len(arms)), arms, rotation=45, ha="right", fontsize=8)
        ax.set_yscale("symlog", linthresh=1e-5)
        values = np.concatenate([rows["var_last20"].to_numpy(dtype=float), rows["noise_floor"].to_numpy(dtype=float), thetas])
        values = values[np.isfinite(values)]  # [points]
        ax.set_ylim(0, 3 * values.max() if values.size and values.max() > 0 else 1e-2)
        ax.set_title(env, fontsize=9)
        ax.set_xlabel("arm")
        ax.set_ylabel("var_last20")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Stability: var_last20 vs theta", fontsize=10)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.3, top=0.85, wspace=0.35)
    return fig


def _save(fig: Figure, out: Path, stem: str) -> None:
    fig.savefig(out / f"{stem}.png", dpi=120, metadata=PNG_METADATA)
    fig.savefig(out / f"{stem}.pdf", metadata=PDF_METADATA)
    plt.close(fig)


def write_figures(tidy: pd.DataFrame, runs: pd.DataFrame, out: str | Path, *, arm_order: Optional[Sequence[str]] = None) -> list[Path]:
    """fig3_<env>, fig4_<env> and stability, as PNG and PDF under `out`; returns the PNG paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stems = []
    with plt.rc_context({"svg.hashsalt": "arena", "pdf.compression": 6}):
        for env in dict.fromkeys(runs["env"]):
            _save(training_dynamics_figure(tidy, env, arm_order=arm_order), out, f"fig3_{env}")
            _save(is_analysis_figure(tidy, env, arm_order=arm_order), out, f"fig4_{env}")
            stems += [f"fig3_{env}", f"fig4_{env}"]
        _save(stability_figure(runs, arm_order=arm_order), out, "stability")
    return [out / f"{s}.png" for s in stems + ["stability"]]
