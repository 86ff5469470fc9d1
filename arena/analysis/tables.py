"""Render the table data (table_data.build_table) as table.md, table.tex and table.csv.

Fixed float formatting and no timestamps, so a rerun is byte-identical. Success rates in points.
"""
from __future__ import annotations

import io
import json
import math
from typing import Any

import pandas as pd

from .table_data import AVG

CSV_COLUMNS = ("arm", "method", "group", "env", "n_seeds", "n_failed", "n_missing", "mean", "std", "ci_low",
               "ci_high", "delta_vs_grpo", "rel_vs_grpo", "stable", "iqm", "p_improve_vs_grpo", "chosen_hp")
MIN_BASELINE = 10.0  # points; the relative change is shown only above it
NONE_MD, NONE_TEX = "—", "--"


def _ok(x: Any) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _num(x: float, none: str, fmt: str = ".1f") -> str:
    return format(x, fmt) if _ok(x) else none


def _counts(row: pd.Series) -> str:
    """(n=2; 1 failed, 1 missing)"""
    extra = [f"{row[k]} {k[2:]}" for k in ("n_failed", "n_missing") if row[k]]
    return f"(n={row['n_seeds']}{'; ' + ', '.join(extra) if extra else ''})"


def _cell(row: pd.Series, *, pm: str, none: str) -> str:
    """mean ± std [ci_low, ci_high] (n=..): the CI is "n<3" with fewer than 3 seeds."""
    if row["n_seeds"] == 0 or not _ok(row["mean"]):
        return f"{none} {_counts(row)}"
    ci = f"[{row['ci_low']:.1f}, {row['ci_high']:.1f}]" if _ok(row["ci_low"]) else "n<3"
    spread = [] if row["env"] == AVG else [f"{pm}{_num(row['std'], none)}"]
    return " ".join([f"{row['mean']:.1f}", *spread, ci, _counts(row)])


def _delta(row: pd.Series, *, none: str, pct: str) -> str:
    if not _ok(row["delta_vs_grpo"]):
        return none
    rel = f" ({row['rel_vs_grpo'] * 100:+.1f}{pct})" if _ok(row["rel_vs_grpo"]) else ""
    return f"{row['delta_vs_grpo']:+.1f}{rel}"


def _per_env(mapping: dict, fmt) -> str:
    return "; ".join(f"{env}: {fmt(v)}" for env, v in mapping.items())


def _hp_text(hp: Any) -> str:
    if isinstance(hp, dict):
        return ", ".join(f"{k}={format(v, 'g') if isinstance(v, float) else v}" for k, v in sorted(hp.items()))
    return json.dumps(hp, sort_keys=True)


def _grid(cells: pd.DataFrame, text) -> list[tuple[str, str, list[str]]]:
    """(group, arm, [text per env column]) in table order."""
    envs = list(dict.fromkeys(cells["env"]))
    rows = []
    for arm, block in cells.groupby("arm", sort=False):
        by_env = block.set_index("env", drop=False)
        rows.append((block["group"].iloc[0], arm, [text(by_env.loc[e]) for e in envs]))
    return rows


def render_markdown(cells: pd.DataFrame, arms: pd.DataFrame, *, name: str) -> str:
    envs = list(dict.fromkeys(cells["env"]))
    head = "| group | arm | " + " | ".join(envs) + " |\n|" + "---|" * (len(envs) + 2) + "\n"
    out = [f"# {name}: final eval success (points)\n\n",
           "Each cell: mean ± std over seeds [95% stratified-bootstrap CI, 2000 resamples] (n seeds that "
           "finished; failed and missing runs are counted, never scored). Fewer than 3 seeds: n<3, no CI. "
           "Avg: the mean of the per-env means, CI stratified over envs.\n\n", head]
    out += [f"| {g} | {a} | " + " | ".join(t) + " |\n" for g, a, t in _grid(cells, lambda r: _cell(r, pm="± ", none=NONE_MD))]
    out += [f"\n## Change vs GRPO (points; relative only where the GRPO mean is >= {MIN_BASELINE:g} points)\n\n", head]
    out += [f"| {g} | {a} | " + " | ".join(t) + " |\n" for g, a, t in _grid(cells, lambda r: _delta(r, none=NONE_MD, pct="%"))]
    out += ["\n## Per method\n\n",
            "IQM: 25% trimmed mean over (env, seed). P(>GRPO): P(X > Y) over all seed pairs per env, averaged "
            "over envs (Agarwal et al. 2021). stable: every seed stable (yes), one not (no), seeds lacking (?).\n\n",
            "| group | arm | method | n | IQM | P(>GRPO) | stable | chosen hp |\n|---|---|---|---|---|---|---|---|\n"]
    for r in arms.itertuples():
        chosen = _per_env(r.chosen_hp, _hp_text) or NONE_MD
        out.append(f"| {r.group} | {r.arm} | {r.method} | {r.n_runs} | {_num(r.iqm, NONE_MD)} | "
                   f"{_num(r.p_improve_vs_grpo, NONE_MD, '.2f')} | {_per_env(r.stable, str)} | {chosen} |\n")
    return "".join(out)


def _tex(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        text = text.replace(a, b)
    return text


def _tex_tabular(rows: list[tuple[str, str, list[str]]], columns: list[str]) -> list[str]:
    out = [r"\begin{tabular}{l" + "c" * len(columns) + "}\n", r"\toprule" + "\n",
           "Method & " + " & ".join(_tex(c) for c in columns) + r" \\" + "\n"]
    group = None
    for g, arm, texts in rows:
        if g != group:
            out += [r"\midrule" + "\n", rf"\multicolumn{{{len(columns) + 1}}}{{l}}{{\textit{{{_tex(g)}}}}} \\" + "\n"]
            group = g
        out.append(_tex(arm) + " & " + " & ".join(texts) + r" \\" + "\n")
    return out + [r"\bottomrule" + "\n", r"\end{tabular}" + "\n"]


def render_latex(cells: pd.DataFrame, arms: pd.DataFrame, *, name: str) -> str:
    envs = list(dict.fromkeys(cells["env"]))
    cell = lambda r: _tex(_cell(r, pm="± ", none=NONE_TEX)).replace("±", r"$\pm$").replace("n<3", r"$n<3$")
    out = [f"% {_tex(name)}: final eval success (points); mean \\pm std [95\\% CI] (n)\n"]
    out += _tex_tabular(_grid(cells, cell), envs)
    out += ["\n% change vs GRPO (points; relative where GRPO >= 10 points)\n"]
    out += _tex_tabular(_grid(cells, lambda r: _tex(_delta(r, none=NONE_TEX, pct="%"))), envs)
    per_method = [(r.group, r.arm, [_tex(r.method), str(r.n_runs), _num(r.iqm, NONE_TEX), _num(r.p_improve_vs_grpo, NONE_TEX, ".2f"),
                                    _tex(_per_env(r.stable, str)), _tex(_per_env(r.chosen_hp, _hp_text) or NONE_TEX)])
                  for r in arms.itertuples()]
    out += ["\n% per method\n"]
    out += _tex_tabular(per_method, ["method", "n", "IQM", "P(>GRPO)", "stable", "chosen hp"])
    return "".join(out)


def render_csv(cells: pd.DataFrame, arms: pd.DataFrame) -> str:
    per_arm = arms.set_index("arm")
    frame = cells.copy()
    frame["iqm"] = frame["arm"].map(per_arm["iqm"])
    frame["p_improve_vs_grpo"] = frame["arm"].map(per_arm["p_improve_vs_grpo"])
    chosen = [per_arm.loc[a, "chosen_hp"].get(e) for a, e in zip(frame["arm"], frame["env"])]
    frame["chosen_hp"] = [json.dumps(c, sort_keys=True) if c is not None else "" for c in chosen]
    buf = io.StringIO()
    frame[list(CSV_COLUMNS)].to_csv(buf, index=False, float_format="%.4f", lineterminator="\n")
    return buf.getvalue()
