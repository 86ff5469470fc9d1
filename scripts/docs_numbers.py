"""Write every figure the README and the manual state about runs, from committed tables.

    python scripts/docs_numbers.py           # rewrite the generated blocks and docs/findings/findings.{md,csv}
    python scripts/docs_numbers.py --check   # exit 1 and name each block or file that disagrees

Inputs (docs/testbed.md, "How the numbers are made"):
- docs/findings/*_runs.csv: one row per run of a documented sweep; `arena findings` (arena/analysis/findings.py)
  turns them into the findings table, its verdicts and the gains over the BC start;
- docs/figures/current_figures.csv: wall times and benchmark ratios, one row per measurement
  (what, value, unit, date, commit, machine, log); a value `=resolved:SWEEP` is computed: how many of
  that run table's comparisons the verdict rule resolves; docs/figures/machines.csv names the machine kinds.

A generated block sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`; the text
between the two lines is this script's output and nothing else. Adding a run table or a figures row and
rerunning this one command updates the README, the manual and the findings files."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arena.analysis import findings as F  # noqa: E402  (the repository root on the path first)
from arena.analysis import run_tables as R  # noqa: E402
from arena.analysis import verdicts  # noqa: E402

RESOLVED = (verdicts.BETTER, verdicts.WORSE, verdicts.NO_DIFFERENCE)
BUDGET_ORDER = ("stress", "default", "learn")
BUDGET_WORDS = {"stress": "In the collapse regime (`budget=stress`)", "default": "At `budget=default`",
                "learn": "At `budget=learn`"}
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)", re.S)


def _pm(x: float) -> str:
    """Signed, one decimal; two where one would round a nonzero number to 0 (as the findings table does)."""
    text = f"{x:+.1f}"
    return f"{x:+.2f}" if x != 0 and float(text) == 0 else text


_FINDINGS: dict[tuple, tuple[pd.DataFrame, str, str]] = {}  # by the run tables' names and texts


def _findings(root: Path) -> tuple[pd.DataFrame, str, str]:
    """(rows of findings.csv as a frame, findings.md, findings.csv) from the committed run tables."""
    import io

    key = tuple((p.name, p.read_text()) for p in sorted((root / "docs" / "findings").glob("*_runs.csv")))
    if key not in _FINDINGS:
        markdown, csv_text = F.build(R.read_run_tables(root / "docs" / "findings"))
        _FINDINGS[key] = (pd.read_csv(io.StringIO(csv_text), dtype={"seeds": str}), markdown, csv_text)
    return _FINDINGS[key]


def _run_table_texts(root: Path) -> list[pd.DataFrame]:
    """Every committed run table as text columns ('' where empty), in file-name order."""
    return [pd.read_csv(path, dtype=str, keep_default_na=False)
            for path in sorted((root / "docs" / "findings").glob("*_runs.csv"))]


def calibration_sweeps(root: Path) -> dict[str, str]:
    """{sweep: what its seeds chose} for the run tables whose `calibration` column says so: the seeds
    a regime or a measure was chosen on. Their rows stay in the findings table, but the README's
    findings leave them out: an effect measured where a design was chosen is no claim."""
    out = {}
    for runs in _run_table_texts(root):
        chose = sorted({c for c in runs.get("calibration", pd.Series(dtype=str)) if c})
        if chose:
            out[str(runs["sweep"].iloc[0])] = "; ".join(chose)
    return out


def found_bullets(table: pd.DataFrame, calibration: dict[str, str] | None = None) -> str:
    """One bullet per budget with a resolved comparison of a paper finding, then what stays open;
    the calibration sweeps' rows are named, not counted."""
    calibration = calibration or {}
    table = table[~table["sweep"].isin(list(calibration))]
    rows = table[(table["kind"] == "finding") & table["verdict"].isin(RESOLVED)]
    budgets = sorted(set(rows["budget"]), key=lambda b: (BUDGET_ORDER.index(b) if b in BUDGET_ORDER else 99, b))
    paper = {"agrees": "agrees with the paper", "opposite": "the paper's opposite",
             "not found": "the paper's difference not found"}
    out = []
    for budget in budgets:
        out.append(f"- {BUDGET_WORDS.get(budget, f'At `budget={budget}`')}:")
        for _, r in rows[rows["budget"] == budget].iterrows():
            measure = "" if r["measure"] in ("final", "") or pd.isna(r["measure"]) else f" on `{r['measure']}`"
            out.append(f"  - {r['comparison']}{measure} {_pm(r['mean'])} [{_pm(r['low'])}, {_pm(r['high'])}] points, "
                       f"**{r['verdict']}** ({r['finding']}, {paper.get(r['vs_paper'], r['vs_paper'])}; "
                       f"`{r['sweep']}`, seeds {r['seeds']}, {r['commit']})")
    tested = table[(table["kind"] == "finding") & (table["verdict"] != "no sweep")]
    open_ = tested[~tested["verdict"].isin(RESOLVED)]
    seeds = f"{int(open_['n'].min())}-{int(open_['n'].max())}" if len(open_) else "-"
    out.append(f"\nThe other {len(open_)} of the findings table's {len(tested)} tested comparisons are "
               f"\"underpowered\" at {seeds} seeds (docs/findings/findings.md).")
    if calibration:
        named = ", ".join(f"`{s}` ({why})" for s, why in calibration.items())
        out.append(f"Not counted: the calibration sweeps {named}, whose seeds chose the design.")
    return "\n".join(out)


def grpo_evidence(table: pd.DataFrame) -> str:
    """GRPO's gain over its BC start in every committed sweep: the evidence the budgets were chosen on."""
    rows = table[(table["kind"] == "gain") & (table["comparison"] == "GRPO - start")]
    # Gains over the start are exploratory (docs/methods.md §14): an estimate, its Holm-adjusted
    # interval and p, and the smallest effect the design detects; no verdict word.
    lines = ["| sweep | budget | runs | seeds | GRPO's gain over its BC start [CI] | Holm p (exploratory) | detects |",
             "|---|---|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        lines.append(f"| `{r['sweep']}` | {r['budget']} | {r['commit']} | {r['seeds']} | "
                     f"{_pm(r['mean'])} [{_pm(r['low'])}, {_pm(r['high'])}] | {float(r['p_adjusted']):.3f} | "
                     f"{float(r['mde']):.1f} |")
    return "\n".join(lines)


def learning_bars(root: Path) -> str:
    """Per run of the run tables with a `gain_paired_se` column: its start and end on the same held-out
    episodes and the gain in both SEs a learning test can use (tests/embedded/learning_runs.py):
        two-sample SE = sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n);  paired SE = gain_paired_se (by episode)."""
    lines = ["| sweep | env | machine | seed | step 0 -> final (n) | gain (points) | two-sample SE | paired SE |",
             "|---|---|---|---|---|---|---|---|"]
    for runs in _run_table_texts(root):
        if "gain_paired_se" not in runs:
            continue
        for _, r in runs.iterrows():
            p0, p1, n = float(r["initial_eval_success"]), float(r["final_eval_success"]), int(r["n_eval"])
            gain = p1 - p0
            two_sample = (p0 * (1 - p0) / n + p1 * (1 - p1) / n) ** 0.5
            lines.append(f"| `{r['sweep']}` | {r['env']} | {r.get('machine', '')} | {int(r['seed'])} | "
                         f"{100 * p0:.1f}% -> {100 * p1:.1f}% ({n}) | {_pm(100 * gain)} | {gain / two_sample:.2f} | "
                         f"{gain / float(r['gain_paired_se']):.2f} |")
    return "\n".join(lines)


def resolved(table: pd.DataFrame, sweep: str) -> tuple[str, str]:
    """(value, unit) of a figure `=resolved:SWEEP`: how many of the findings table's confirmatory
    comparisons of that run table (the paper's findings) the verdict rule resolves."""
    # the confirmatory rows only: gains over the start are exploratory estimates with no verdict
    rows = table[(table["sweep"] == sweep) & (table["kind"] == "finding") & (table["verdict"] != "no sweep")]
    if rows.empty:
        raise SystemExit(f"current_figures.csv: =resolved:{sweep}: no run table docs/findings/{sweep}_runs.csv")
    n = int(rows["verdict"].isin(RESOLVED).sum())
    return f"{n} of {len(rows)}", f"comparisons resolved (`{sweep}`, seeds {rows['seeds'].iloc[0]})"


def _figures(root: Path, table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The figures table; a value `=resolved:SWEEP` is computed from that sweep's committed run table."""
    figures = pd.read_csv(root / "docs" / "figures" / "current_figures.csv", dtype=str, keep_default_na=False)
    for i, value in figures["value"].items():
        if value.startswith("=resolved:"):
            figures.loc[i, ["value", "unit"]] = resolved(table, value.removeprefix("=resolved:"))
    machines = pd.read_csv(root / "docs" / "figures" / "machines.csv", dtype=str)
    return figures, dict(zip(machines["machine"], machines["description"]))


def _figure_line(r, link_log: bool) -> str:
    unit = r["unit"]
    value = f"{r['value']}{unit}" if unit == "x" else f"{r['value']} {unit}"
    log = f" | [log]({Path(r['log']).relative_to('docs').as_posix()})" if link_log else ""
    return f"| {r['what']} | **{value}** | {r['date']} | {r['commit']} | {r['machine']}{log} |"


def figures_latest(figures: pd.DataFrame, machines: dict[str, str]) -> str:
    """The README's table: the newest row of each `what` (ties: the later row of the file)."""
    latest = figures.assign(order=range(len(figures))).sort_values(["date", "order"]).groupby("what", sort=False).tail(1)
    latest = latest.sort_values("order")
    lines = ["| what | value | date | commit | machine |", "|---|---|---|---|---|"]
    lines += [_figure_line(r, False) for _, r in latest.iterrows()]
    used = [m for m in dict.fromkeys(latest["machine"])]
    lines += ["", "Machines: " + "; ".join(f"{m}: {machines[m]}" for m in used) + "."]
    return "\n".join(lines)


def figures_all(figures: pd.DataFrame, machines: dict[str, str]) -> str:
    """The manual's table: every row, with the log entry that measured it."""
    lines = ["| what | value | date | commit | machine | measured in |", "|---|---|---|---|---|---|"]
    lines += [_figure_line(r, True).replace("[log](", "[the log](") for _, r in figures.iterrows()]
    lines += [""] + [f"- Machine {m}: {d}." for m, d in machines.items()]
    return "\n".join(lines)


def blocks(root: Path = ROOT) -> tuple[dict[str, Callable[[], str]], dict[Path, str]]:
    """The text of every generated block by name, and the whole text of every generated file."""
    table, markdown, csv_text = _findings(root)
    figures, machines = _figures(root, table)
    texts = {"found": lambda: found_bullets(table, calibration_sweeps(root)), "findings": lambda: markdown.rstrip("\n"),
             "grpo-evidence": lambda: grpo_evidence(table), "figures": lambda: figures_latest(figures, machines),
             "figures-all": lambda: figures_all(figures, machines), "learning-bars": lambda: learning_bars(root)}
    files = {root / "docs" / "findings" / "findings.md": markdown, root / "docs" / "findings" / "findings.csv": csv_text}
    return texts, files


DOCS = ("README.md", "docs/testbed.md")


def render(text: str, texts: dict[str, Callable[[], str]], where: str) -> str:
    """`text` with every generated block's body replaced; an unknown block name is an error."""
    def body(m: re.Match) -> str:
        name = m.group("name")
        if name not in texts:
            raise SystemExit(f"{where}: unknown generated block {name!r}; valid: {', '.join(sorted(texts))}")
        return f"{m.group(1)}{texts[name]()}\n{m.group(4)}"

    return BLOCK.sub(body, text)


def differences(root: Path = ROOT) -> list[str]:
    """Each generated block or file whose committed text is not what the inputs give."""
    texts, files = blocks(root)
    out = []
    for rel in DOCS:
        text = (root / rel).read_text()
        for m in BLOCK.finditer(text):
            made = render(m.group(0), texts, rel)
            if made != m.group(0):
                out.append(f"{rel}: block {m.group('name')!r}")
    out += [f"{p.relative_to(root)}" for p, made in files.items() if p.read_text() != made]
    return out


def write(root: Path = ROOT) -> list[str]:
    texts, files = blocks(root)
    changed = []
    for rel in DOCS:
        path = root / rel
        text = path.read_text()
        made = render(text, texts, rel)
        if made != text:
            path.write_text(made)
            changed.append(rel)
    for path, made in files.items():
        if path.read_text() != made:
            path.write_text(made)
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a doc disagrees")
    args = parser.parse_args(argv)
    if args.check:
        bad = differences()
        for b in bad:
            print(f"out of date: {b} (run: python scripts/docs_numbers.py)")
        return 1 if bad else 0
    for rel in write():
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
