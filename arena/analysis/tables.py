"""Render the table data (table_data.build_table) as table.md, table.tex and table.csv
(docs/design.md, Report). Fixed float formatting and no timestamps, so a rerun is
byte-identical. Success rates in points.

One marker for missing data everywhere: an aggregate over envs that the missing-data rule of
table_data leaves out prints as "— (missing ENV)".
"""
from __future__ import annotations

import io
import json
import math
import re
from typing import Any, Callable

import pandas as pd

from . import stats, verdicts
from .confirmatory import lines as confirmatory_lines
from .table_data import AVG

# exploratory comparisons: estimate, interval, n, p (Holm within the column), mde; no verdict column
COMPARISON_COLUMNS = ("", "_ci_low", "_ci_high", "_n", "_p", "_mde", "_missing")
CELL_COLUMNS = ("arm", "method", "group", "env", "baseline", "n_seeds", "n_failed", "n_missing", "mean", "std", "ci_low",
                "ci_high", "missing", "start", "start_missing", *(f"gain{c}" for c in COMPARISON_COLUMNS),
                *(f"diff{c}" for c in COMPARISON_COLUMNS), "twin_of", *(f"twin{c}" for c in COMPARISON_COLUMNS), "stable")
ARM_COLUMNS = ("iqm", "iqm_ci_low", "iqm_ci_high", "p_improve", "p_ci_low", "p_ci_high", "chosen_hp")
NONE_MD, NONE_TEX = "—", "--"


def _ok(x: Any) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _num(x: float, none: str, fmt: str = ".1f") -> str:
    return format(x, fmt) if _ok(x) else none


def _ci(low: float, high: float, fmt: str = ".1f", *, too_few: str = "n<3") -> str:
    """[low, high]; `too_few` without an interval; "tied" for the unbounded interval of all-equal
    paired differences at too few seeds (verdicts.paired_t_test)."""
    if not _ok(low):
        return too_few
    return f"[{low:{fmt}}, {high:{fmt}}]" if math.isfinite(low) else "tied"


def _absent(missing: str, none: str) -> str:
    return f"{none} (missing {missing})"


def _counts(row: pd.Series) -> str:
    """(n=2; 1 failed, 1 missing)"""
    extra = [f"{row[k]} {k[2:]}" for k in ("n_failed", "n_missing") if row[k]]
    return f"(n={row['n_seeds']}{'; ' + ', '.join(extra) if extra else ''})"


def _final(row: pd.Series, *, pm: str, none: str) -> str:
    """mean ± std [ci_low, ci_high] (n=..): the CI is "n<3" with fewer than 3 seeds."""
    if row["missing"] and row["env"] == AVG:
        return f"{_absent(row['missing'], none)} {_counts(row)}"
    if row["n_seeds"] == 0 or not _ok(row["mean"]):
        return f"{none} {_counts(row)}"
    spread = [] if row["env"] == AVG else [f"{pm}{_num(row['std'], none)}"]
    return " ".join([f"{row['mean']:.1f}", *spread, _ci(row["ci_low"], row["ci_high"]), _counts(row)])


def _paired(row: pd.Series, prefix: str, *, none: str) -> str:
    """mean difference [t-interval at the family-adjusted level] (n=pairs), or the missing-data marker."""
    if row[f"{prefix}_missing"]:
        return _absent(row[f"{prefix}_missing"], none)
    if not _ok(row[prefix]):
        return none
    interval = _ci(row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"], too_few="n<2")
    return f"{row[prefix]:+.1f} {interval} (n={row[f'{prefix}_n']})"


def _p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _exploratory(row: pd.Series, prefix: str, *, none: str) -> list[str]:
    """[p (Holm-adjusted within the column), detectable difference]: an exploratory comparison's
    numbers, no verdict word (the confirmatory section alone has verdicts)."""
    if not row[f"{prefix}_verdict"]:
        return [none, none]
    mde = row[f"{prefix}_mde"]
    detects = f"{mde:.1f}" if _ok(mde) and math.isfinite(mde) else none
    return [_p_text(row[f"{prefix}_p"]) if row[f"{prefix}_n"] >= 2 else "n<2", detects]


def _start(row: pd.Series, *, none: str) -> str:
    return _absent(row["start_missing"], none) if row["start_missing"] else _num(row["start"], none)


def _per_env(mapping: dict, fmt) -> str:
    return "; ".join(f"{env}: {fmt(v)}" for env, v in mapping.items())


def _hp_text(hp: Any) -> str:
    if isinstance(hp, dict):
        return ", ".join(f"{k}={format(v, 'g') if isinstance(v, float) else v}" for k, v in sorted(hp.items()))
    return json.dumps(hp, sort_keys=True)


def _grid(cells: pd.DataFrame, text: Callable[[pd.Series], list[str]], tail: Callable[[pd.DataFrame], list[str]] = lambda b: []):
    """(group, arm, [texts per env column..., tail texts]) in table order."""
    envs = list(dict.fromkeys(cells["env"]))
    rows = []
    for arm, block in cells.groupby("arm", sort=False):
        by_env = block.set_index("env", drop=False)
        rows.append((block["group"].iloc[0], arm, [t for e in envs for t in text(by_env.loc[e])] + tail(by_env)))
    return rows


def _arm_stat(value: float, low: float, high: float, missing: str, none: str, fmt: str) -> str:
    if missing:
        return _absent(missing, none)
    return none if not _ok(value) else f"{value:{fmt}} {_ci(low, high, fmt)}"


def _sections(cells: pd.DataFrame, arms: pd.DataFrame, none: str) -> list[tuple[str, list[str], list]]:
    """(title, column names, rows) of the four tables, shared by the markdown and LaTeX renderers."""
    envs = list(dict.fromkeys(cells["env"]))
    base = cells["baseline"].iloc[0] or "baseline"
    verdict = lambda prefix: lambda b: _exploratory(b.loc[AVG], prefix, none=none)  # noqa: E731
    per_method = [(r.group, r.arm, [r.method, str(r.n_runs), _arm_stat(r.iqm, r.iqm_ci_low, r.iqm_ci_high, r.missing, none, ".1f"),
                                    _arm_stat(r.p_improve, r.p_ci_low, r.p_ci_high, r.p_missing, none, ".2f"),
                                    _per_env(r.stable, str), _per_env(r.chosen_hp, _hp_text) or none])
                  for r in arms.itertuples()]
    return [
        ("Final eval success (points)", envs, _grid(cells, lambda r: [_final(r, pm="± ", none=none)])),
        ("Start (step-0 eval, the BC policy) and gain = final - start per seed (points; exploratory)",
         [f"{e} {c}" for e in envs for c in ("start", "gain")] + ["gain p (Avg, Holm)", "gain detects (Avg)"],
         _grid(cells, lambda r: [_start(r, none=none), _paired(r, "gain", none=none)], verdict("gain"))),
        (f"Paired change vs {base} (points; exploratory): per seed, arm - {base} on the same seed",
         envs + ["p (Avg, Holm)", "detects (Avg)"],
         _grid(cells, lambda r: [_paired(r, "diff", none=none)], verdict("diff"))),
        ("Per method", ["method", "n", "IQM [95% CI]", f"P(>{base}) [95% CI]", "stable", "chosen hp"], per_method),
    ] + _twin_section(cells, envs, verdict("twin"), none)


def _twin_section(cells: pd.DataFrame, envs: list[str], verdict, none: str) -> list[tuple[str, list[str], list]]:
    """The sequence mask's own effect (Finding 2): each X_sm arm against its unmasked twin X on the
    same seed; no section when the grid has no such pair."""
    paired = cells[cells["twin_of"] != ""]
    if paired.empty:
        return []
    twin_of = dict(zip(paired["arm"], paired["twin_of"]))
    rows = [(group, f"{arm} - {twin_of[arm]}", texts)
            for group, arm, texts in _grid(paired, lambda r: [_paired(r, "twin", none=none)], verdict)]
    return [("Sequence mask: per seed, each _sm arm - its unmasked twin (points; exploratory)",
             envs + ["p (Avg, Holm)", "detects (Avg)"], rows)]


def _family_size(cells: pd.DataFrame, prefix: str) -> int:
    """k of the Avg column's family: the arms with at least 2 seed pairs there (verdicts.compare_family)."""
    avg = cells[cells["env"] == AVG]
    return int(((avg[f"{prefix}_verdict"] != "") & (avg[f"{prefix}_n"] >= 2)).sum())


def notes(cells: pd.DataFrame) -> list[str]:
    """What the numbers mean: the seed counts the CIs rest on, and the verdict rule."""
    base = cells["baseline"].iloc[0] or "the baseline"
    min_effect = float(cells["min_effect"].iloc[0])
    per_env = cells[cells["env"] != AVG]
    counts = sorted({int(n) for n in per_env["n_seeds"] if n >= stats.MIN_SEEDS_FOR_CI})
    seeds = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}" if counts else ""
    coverage = [stats.percentile_ci_coverage_note(n) for n in counts[:1]]
    rests = (f"Each rests on {seeds} seeds per env. " if counts else
             f"No cell has {stats.MIN_SEEDS_FOR_CI} seeds, so none has a CI. ")
    return [
        "Cells: mean ± std over seeds [95% CI] (n = seeds that finished; failed and missing runs are counted, "
        "never scored). Avg (final, start): the mean of the per-env statistics.",
        f"Score CIs (final success, IQM, P): percentile bootstrap, {stats.N_RESAMPLES} resamples, seeds resampled "
        f"within each env (stratified); fewer than {stats.MIN_SEEDS_FOR_CI} seeds: n<3, no CI. " + rests
        + (f"With {coverage[0]}. " if coverage else "") + "They describe; no verdict comes from them.",
        f"Paired: d_s = arm_s - {base}_s on seeds both finished (the same seed: the same BC start and eval rooms); "
        "gain: d_s = final_s - start_s. Avg: d_s averaged over envs, on the seeds paired in every env; n = those "
        "seeds. Interval: the paired t-interval at the family-adjusted level (all d_s equal: \"tied\", none below 6 seeds).",
        "Exploratory (gain, paired change, sequence mask): estimates with intervals, no verdict word; the "
        "verdicts are the confirmatory section's alone. Each column's interval and p are Holm-adjusted within the "
        f"column (Avg: the gains of the {_family_size(cells, 'gain')} arms with 2 or more seed pairs; the "
        f"{_family_size(cells, 'diff')} such arms against {base}"
        + (f"; the {_family_size(cells, 'twin')} _sm arms against their unmasked twins, twin_s = final_s(X_sm) - "
           "final_s(X)" if (cells["twin_of"] != "").any() else "") + "), so they are conservative as estimates.",
        f"detects: the smallest true difference the comparison finds with {verdicts.POWER:.0%} power at its n and "
        f"observed sd (noncentral t, level {verdicts.ALPHA:g}/k); underpowered (confirmatory): about how many seeds "
        f"would detect {min_effect:g} points.",
        "Missing data, one rule for every column: an aggregate over envs (Avg, IQM, P) is computed only when every "
        "env has a finished seed (and, to compare, a finished baseline seed); otherwise it reads — (missing ENV).",
        f"IQM: 25% trimmed mean over (env, seed). P(>{base}): unpaired, P(X > Y) over all seed pairs per env, "
        "averaged over envs (Agarwal et al. 2021). stable: every seed stable (yes), one not (no), seeds lacking (?).",
    ]


CONFIRMATORY_TITLE = "Confirmatory: the paper's findings for this grid (findings.yaml; the only verdicts)"


def _confirmatory_rows(confirmatory) -> list[tuple[str, list[str], list]]:
    """The confirmatory section as (title, columns, rows), first in every renderer; none without it."""
    if confirmatory is None:
        return []
    header, body = confirmatory_lines(confirmatory.rows)
    return [(CONFIRMATORY_TITLE, header[2:], [(b[0], b[1], b[2:]) for b in body])]


def render_markdown(cells: pd.DataFrame, arms: pd.DataFrame, *, name: str, confirmatory=None) -> str:
    """table.md; `confirmatory` (report.Confirmatory: rows and notes) is its first section."""
    out = [f"# {name}: eval success (points)\n\n"]
    for title, columns, rows in _confirmatory_rows(confirmatory):
        out += [f"## {title}\n\n", "| finding | comparison | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 2) + "\n"]
        out += [f"| {g} | {a} | " + " | ".join(t) + " |\n" for g, a, t in rows] + ["\n"]
        out += [f"- {line}\n" for line in confirmatory.notes] + ["\n"]
    for title, columns, rows in _sections(cells, arms, NONE_MD):
        out += [f"## {title}\n\n", "| group | arm | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 2) + "\n"]
        out += [f"| {g} | {a} | " + " | ".join(t) + " |\n" for g, a, t in rows] + ["\n"]
    out += ["## Notes\n\n"] + [f"- {line}\n" for line in notes(cells)]
    return "".join(out)


def _tex(text: str) -> str:
    """LaTeX-safe text: specials escaped; "~" (a tie in LaTeX) and "<" (a different glyph in text
    mode) go to math."""
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"),
                 ("~", r"$\sim$")):
        text = text.replace(a, b)
    text = text.replace("±", r"$\pm$")
    return re.sub(r"\b([np])<([0-9.]+)", r"$\1<\2$", text)


def _tex_tabular(rows: list[tuple[str, str, list[str]]], columns: list[str]) -> list[str]:
    out = [r"\begin{tabular}{l" + "c" * len(columns) + "}\n", r"\toprule" + "\n",
           "Method & " + " & ".join(_tex(c) for c in columns) + r" \\" + "\n"]
    group = None
    for g, arm, texts in rows:
        if g != group:
            out += [r"\midrule" + "\n", rf"\multicolumn{{{len(columns) + 1}}}{{l}}{{\textit{{{_tex(g)}}}}} \\" + "\n"]
            group = g
        out.append(_tex(arm) + " & " + " & ".join(_tex(t) for t in texts) + r" \\" + "\n")
    return out + [r"\bottomrule" + "\n", r"\end{tabular}" + "\n"]


def render_latex(cells: pd.DataFrame, arms: pd.DataFrame, *, name: str, confirmatory=None) -> str:
    out = [f"% {_tex(name)}: eval success (points)\n"]
    for title, columns, rows in _confirmatory_rows(confirmatory) + _sections(cells, arms, NONE_TEX):
        out += [f"\n% {_tex(title)}\n"] + _tex_tabular(rows, columns)
    return "".join(out) + "".join(f"% {_tex(line)}\n" for line in notes(cells))


def render_confirmatory_csv(rows: pd.DataFrame) -> str:
    """confirmatory.csv: one row per finding comparison (confirmatory.COLUMNS), 6 significant digits."""
    frame = rows.copy()
    frame["seeds_needed"] = frame["seeds_needed"].astype("Int64")
    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.6g", lineterminator="\n")
    return buf.getvalue()


def render_csv(cells: pd.DataFrame, arms: pd.DataFrame) -> str:
    """One row per (arm, env) and (arm, Avg); the per-arm statistics repeated on each of its rows."""
    per_arm = arms.set_index("arm")
    frame = cells.copy()
    for col in ARM_COLUMNS[:-1]:
        frame[col] = frame["arm"].map(per_arm[col])
    frame["p_missing"] = frame["arm"].map(per_arm["p_missing"])
    chosen = [per_arm.loc[a, "chosen_hp"].get(e) for a, e in zip(frame["arm"], frame["env"])]
    frame["chosen_hp"] = [json.dumps(c, sort_keys=True) if c is not None else "" for c in chosen]
    buf = io.StringIO()
    frame[list(CELL_COLUMNS + ARM_COLUMNS[:-1] + ("p_missing", "chosen_hp"))].to_csv(
        buf, index=False, float_format="%.4f", lineterminator="\n")
    return buf.getvalue()
