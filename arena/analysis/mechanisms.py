"""What each arm's dimension did during training, not only how it scored (docs/design.md, Report:
mechanisms): a function of the tidy frame (frames.tidy_frame), written as report/mechanisms.md.

Two arms of one dimension can only differ in outcome if their dimension acted. Per run, the
mean over its RL steps (step >= 1) of each metric the trainer logs for every method:

    clipping     outside band = clipfrac_high + clipfrac_low: the share of tokens whose ratio
                 r = exp(logp - old_logp) left [1 - eps_low, 1 + eps_high] (po/clipping.py)
                 masked rows  = actor/masked_seqs (the sequence mask's dropped rows per update)
                 off-policy KL = actor/off_policy_kl = mean(old_logp - logp)
    filtering    kept groups  = filter/kept_group_frac
    advantage    anchor repeats = adv/anchor_repeat_frac, step term = adv/step_term_nonzero_frac
    aggregation  reply length SD = rollout/response_length_std (the spread token-mean and
                 sequence-mean weigh differently)

then per arm the mean over its runs (envs x seeds); "outside band, max" is the largest step
value of any run. A dimension that did not act gets a note saying so, e.g. no token outside any
arm's band: the clipping arms computed the same update, so their differences are seed noise.
"""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

POINTS = 100.0
# (column, label, metrics summed per step, scale)
COLUMNS = (
    ("outside_band", "outside band %", ("actor/clipfrac_high", "actor/clipfrac_low"), POINTS),
    ("masked_rows", "masked rows / update", ("actor/masked_seqs",), 1.0),
    ("off_policy_kl", "off-policy KL", ("actor/off_policy_kl",), 1.0),
    ("kept_groups", "kept groups %", ("filter/kept_group_frac",), POINTS),
    ("anchor_repeats", "anchor repeats %", ("adv/anchor_repeat_frac",), POINTS),
    ("step_term", "step term nonzero %", ("adv/step_term_nonzero_frac",), POINTS),
    ("reply_len_sd", "reply length SD (tokens)", ("rollout/response_length_std",), 1.0),
)
REPLY_SD_ALIKE = 1.0  # tokens: below this, token-mean and sequence-mean weigh rows alike


def _step_values(tidy: pd.DataFrame, metrics: Sequence[str], scale: float) -> pd.DataFrame:
    """(arm, run, step, value): the metrics summed per step of a run, times scale; RL steps only."""
    rows = tidy[tidy["metric"].isin(metrics) & (tidy["step"] >= 1)]
    if rows.empty:
        return pd.DataFrame(columns=["arm", "run", "step", "value"])
    summed = rows.groupby(["arm", "run", "step"], as_index=False)["value"].sum(min_count=1)
    summed["value"] = summed["value"] * scale
    return summed


def mechanism_table(tidy: pd.DataFrame, arms: Sequence[str]) -> pd.DataFrame:
    """One row per arm (in `arms` order): each COLUMNS mean (module docstring), NaN where no run
    of the arm logged it, plus outside_band_max."""
    out = pd.DataFrame({"arm": list(arms)}).set_index("arm")
    for column, _, metrics, scale in COLUMNS:
        steps = _step_values(tidy, metrics, scale)
        per_run = steps.groupby(["arm", "run"])["value"].mean()  # mean over a run's steps
        out[column] = per_run.groupby("arm").mean().reindex(out.index)  # mean over the arm's runs
        if column == "outside_band":
            out["outside_band_max"] = steps.groupby("arm")["value"].max().reindex(out.index)
    return out.reset_index()


def notes(table: pd.DataFrame) -> list[str]:
    """A sentence for each dimension that did not act in any arm (module docstring)."""
    said = []

    def logged(column: str) -> Optional[pd.Series]:
        values = table[column].dropna()
        return values if len(values) else None

    band = logged("outside_band_max")
    if band is not None and (band == 0).all():
        said.append("No token left any arm's clip band at any step: the IS-clipping arms computed the same "
                    "update, so their differences are seed noise (several updates per batch, as budget=stress "
                    "runs, make them act).")
    kept = logged("kept_groups")
    if kept is not None and (kept >= POINTS).all():
        said.append("Filtering dropped no group in any arm: the filtering arms trained on the same batches.")
    anchors = logged("anchor_repeats")
    if anchors is not None and (anchors == 0).all():
        said.append("No anchor state repeated within a group: GiGPO's step term had no step groups to act on.")
    spread = logged("reply_len_sd")
    if spread is not None and (spread < REPLY_SD_ALIKE).all():
        said.append(f"Replies had nearly one length (SD < {REPLY_SD_ALIKE:g} token in every arm): token-mean and "
                    "sequence-mean aggregation weighed rows alike.")
    return said


def render_mechanisms(table: pd.DataFrame, *, name: str) -> str:
    """mechanisms.md: the table (each column's mean over the arm's runs) and the notes."""
    shown = [(c, label) for c, label, _, _ in COLUMNS if table[c].notna().any()]
    head = ["arm", *[label for _, label in shown]]
    if table["outside_band_max"].notna().any():
        head.append("outside band % (max step)")
    lines = [f"## What each arm's dimension did: {name}", "",
             "Mean over each run's RL steps, then over the arm's runs (docs/design.md, Report: mechanisms).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table.itertuples(index=False):
        cells = [row.arm, *[_fmt(getattr(row, c)) for c, _ in shown]]
        if table["outside_band_max"].notna().any():
            cells.append(_fmt(row.outside_band_max))
        lines.append("| " + " | ".join(cells) + " |")
    said = notes(table)
    if said:
        lines += ["", *[f"- {s}" for s in said]]
    return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.3g}"
