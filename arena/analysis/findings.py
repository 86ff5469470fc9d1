"""`arena findings`: the paper's findings (arena/analysis/findings.yaml) tested on the runs of a results
dir or of committed run tables (docs/testbed.md, "Findings table"; docs/design.md, Report).

Input: one row per run, the columns of the report's runs table (arena.analysis.frames.runs_frame, or
the `<name>_runs.csv` files of arena.analysis.tidy_csv): sweep, arm, env, seed, final_eval_success,
initial_eval_success, status, stable, budget, git_sha; optional recorded_in (the commit whose docs
recorded a run whose commit is not known), command and source (where a transcribed row came from),
config_hash and config_overrides (arena.analysis.frames: the hash of the settings the sweep's cells
share, and the arm's override keys it leaves out). A row whose config_hash is not today's for its
budget and env is labelled `<budget>@<hash>`: a former default is not today's. A `csv=` table is
checked first (`check_run_table`): successes in [0, 1], integer seeds, known statuses, no score
on a failed or missing row, one row per (sweep, arm, env, seed); a bad row is a ValueError naming
the file and line (exit 2).

For each comparison `arm - baseline` of each finding and each sweep that holds both arms: the paired
per-seed differences of the final eval success (points; the mean over environments of seed s), under
the one verdict rule (arena.analysis.verdicts.compare_family: paired t, Holm across the comparisons of
one finding in one sweep; a comparison with one seed is untested and not counted in the family). For
each arm of each sweep: its gain over its own step-0 eval (Holm across the sweep's arms). A comparison that no sweep holds says which command makes it.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import yaml

from arena.cli_errors import BadInput
from arena.config import load_config
from arena.config.load import settings_hash
from arena.config.verb_args import FindingsArgs, parse_own_args
from arena.io.atomic import atomic_write_text
from arena.runs.layout import MANIFEST_FILE, Results

from . import measures, verdicts
from .collapse_rule import counts_text, guarded
from .frames import runs_frame, tidy_frame

FINDINGS_FILE = Path(__file__).with_name("findings.yaml")
TEXT_COLUMNS = ("sweep", "arm", "env", "status", "budget", "git_sha", "recorded_in", "command", "source", "config_hash",
                "config_overrides")
STATUSES = ("done", "collapsed", "no_format", "failed", "missing")  # arena.analysis.frames.STATUSES
UNSCORED = ("failed", "missing")  # statuses that carry no eval success
PAPER_POINTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+vs\s+(\d+(?:\.\d+)?)\b")  # "34.03 vs 46.16 (average)"


@dataclass(frozen=True)
class Claim:
    """One comparison of one finding: `arm - baseline`, and what the paper reports for it."""
    finding: str
    claim: str
    cite: str
    dimension: str
    arm: str
    baseline: str
    paper: str
    sign: Optional[int]
    measure: str = measures.DEFAULT  # what is compared per run (arena/analysis/measures.py)


def load_claims(path: str | Path = FINDINGS_FILE) -> list[Claim]:
    """findings.yaml -> one Claim per comparison, in file order; a finding's `measure` (default
    `final`) must be one of measures.MEASURES."""
    data = yaml.safe_load(Path(path).read_text())
    return [Claim(f["id"], f["claim"], f["cite"], f["dimension"], c["arm"], c["baseline"], c["paper"], c["sign"],
                  measures.check(f.get("measure", measures.DEFAULT), f"finding {f['id']}: measure"))
            for f in data["findings"] for c in f["comparisons"]]


def _stable_value(value):
    """A run's `stable` (bool, "true"/"false", "unresolved", empty) as True / False / None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return {"true": True, "false": False}.get(str(value).strip().lower())


def normalise_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The columns the findings read, with text columns as text ('' when absent) and `stable` as
    True / False / None."""
    runs = runs.copy()
    for col in TEXT_COLUMNS:
        runs[col] = runs[col].fillna("").astype(str) if col in runs else ""
    runs["seed"] = runs["seed"].astype(int)
    for col in ("final_eval_success", "initial_eval_success"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce").astype(float)
    runs["stable"] = [_stable_value(v) for v in runs["stable"]] if "stable" in runs else None
    runs["budget"] = budget_labels(runs)
    return runs


@functools.lru_cache(maxsize=None)
def todays_settings_hash(budget: str, env: str, overrides: str) -> Optional[str]:
    """settings_hash of today's `budget=<budget> env=<env>` (leaving out the `overrides` keys, comma
    separated), or None when today's configs have no such budget or env."""
    try:
        return settings_hash(load_config([f"budget={budget}", f"env={env}"]), [k for k in overrides.split(",") if k])
    except Exception:  # a budget or env that is gone: no today's config to match
        return None


def budget_labels(runs: pd.DataFrame) -> list[str]:
    """Each row's budget, as `<budget>@<config_hash>` where its settings are not today's budget's
    (a row with no config_hash keeps its label: transcribed rows name their keys in `command`)."""
    return [b if not (b and h) or h == todays_settings_hash(b, e, o) else f"{b}@{h}"
            for b, e, h, o in zip(runs["budget"], runs["env"], runs["config_hash"], runs["config_overrides"])]


def check_run_table(frame: pd.DataFrame, path: Path) -> None:
    """ValueError naming `path` and the line of the first bad row (module docstring); line 1 is the header."""
    def bad(i: int, what: str) -> ValueError:
        return ValueError(f"{path}, line {i + 2}: {what}")

    for i, row in frame.iterrows():
        seed = pd.to_numeric(pd.Series([row.get("seed")]), errors="coerce").iloc[0]
        if pd.isna(seed) or float(seed) != int(seed):
            raise bad(i, f"seed={row.get('seed')!r}; valid: an integer")
        for col in ("final_eval_success", "initial_eval_success"):
            value = pd.to_numeric(pd.Series([row.get(col)]), errors="coerce").iloc[0]
            if pd.notna(row.get(col)) and not (pd.notna(value) and 0.0 <= value <= 1.0):
                raise bad(i, f"{col}={row.get(col)!r}; valid: empty or a fraction in [0, 1]")
        status = row.get("status")
        if "status" in frame and status not in STATUSES:
            raise bad(i, f"status={status!r}; valid: {', '.join(STATUSES)}")
        if status in UNSCORED and pd.notna(row.get("final_eval_success")):
            raise bad(i, f"status={status} with final_eval_success={row['final_eval_success']!r}; a {status} run "
                         "has no score: leave final_eval_success empty")
    key = frame[["sweep", "arm", "env"]].astype(str).assign(seed=pd.to_numeric(frame["seed"]).astype(int))
    twice = key.duplicated(keep=False)
    if twice.any():
        lines = [i + 2 for i in frame.index[twice]]
        first = key[twice].iloc[0]
        raise ValueError(f"{path}, lines {', '.join(map(str, lines))}: (sweep, arm, env, seed) = ({first['sweep']}, "
                         f"{first['arm']}, {first['env']}, {first['seed']}) more than once; valid: one row per run")


def read_run_tables(path: str | Path) -> pd.DataFrame:
    """The committed run tables: one `<name>_runs.csv` file, or every such file in a folder (name order)."""
    path = Path(path)
    files = sorted(path.glob("*_runs.csv")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"no <name>_runs.csv file at {path}")
    frames = [pd.read_csv(f, keep_default_na=False, na_values=[""], dtype={c: str for c in TEXT_COLUMNS})
              for f in files]
    # a report's runs table (analysis/tidy_csv.py export) has no sweep column: its file names it
    frames = [frame if "sweep" in frame else frame.assign(sweep=f.name.removesuffix("_runs.csv"))
              for f, frame in zip(files, frames)]
    for f, frame in zip(files, frames):
        check_run_table(frame, f)
    runs = normalise_runs(pd.concat(frames, ignore_index=True))
    return measures.add_measures(runs, _metrics_beside(files, frames) if _needs_curves() else None)


def _needs_curves() -> bool:
    """Whether a finding's measure reads the eval curves (the metrics table), not the runs alone."""
    return any(c.measure == measures.DROP_FROM_BEST for c in load_claims())


def _metrics_beside(files: Sequence[Path], frames: Sequence[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """The `<name>_metrics.csv` beside each `<name>_runs.csv` (analysis/tidy_csv.py export), with the
    runs file's sweep; None when there is none (a measure that needs the curves is then NaN)."""
    parts = []
    for f, frame in zip(files, frames):
        metrics = f.with_name(f.name.removesuffix("_runs.csv") + "_metrics.csv")
        if metrics.is_file():
            parts.append(pd.read_csv(metrics).assign(sweep=str(frame["sweep"].iloc[0])))
    return pd.concat(parts, ignore_index=True) if parts else None


def read_results_dir(results_dir: str | Path) -> pd.DataFrame:
    """Every sweep of a results dir (`<results_dir>/sweeps/<name>/manifest.json`), its report runs."""
    results = Results(results_dir)
    names = [p.parent.name for p in results.sweep_manifests()]
    if not names:
        raise FileNotFoundError(f"no sweep under {results.sweeps} (no */{MANIFEST_FILE})")
    runs = normalise_runs(runs_frame(results_dir, names))
    if not _needs_curves():
        return measures.add_measures(runs)

    return measures.add_measures(runs, tidy_frame(results_dir, names, runs=runs))


def per_seed(runs: pd.DataFrame, arm: str, value: str = "final_eval_success") -> pd.Series:
    """An arm's value per seed in points: the mean over its environments (NaN runs left out)."""
    rows = runs[(runs["arm"] == arm) & runs[value].notna()]
    return (100.0 * rows.groupby("seed")[value].mean()).sort_index()


def paired_differences(runs: pd.DataFrame, arm: str, baseline: str, value: str = "final_eval_success") -> pd.Series:
    """d_s = arm - baseline on each seed both have (points), seeds in order.
    Per env e and seed s: d_{s,e} = 100 (x_arm - x_base), x the `value` column (a measure's column,
    measures.column); d_s = mean_e d_{s,e} over the envs both arms have a value for on that seed."""
    a = runs[runs["arm"] == arm].set_index(["seed", "env"])[value]
    b = runs[runs["arm"] == baseline].set_index(["seed", "env"])[value]
    d = (100.0 * (a - b)).dropna()  # [(seed, env) pairs both have]
    return d.groupby(level="seed").mean().sort_index()


def gains(runs: pd.DataFrame, arm: str) -> pd.Series:
    """g_s = final - step-0 eval of the arm's own run on seed s (points; mean over envs)."""
    rows = runs[runs["arm"] == arm]
    g = (100.0 * (rows["final_eval_success"] - rows["initial_eval_success"])).groupby(rows["seed"]).mean()
    return g.dropna().sort_index()


def display(arm: str) -> str:
    """An arm as the paper writes it: cispo_sm -> CISPO_SM, gigpo_ds -> GiGPO_DS."""
    return arm.upper().replace("GIGPO", "GiGPO")


def seeds_text(seeds: Sequence[int]) -> str:
    """[0, 1, 2] -> "0-2"; [0, 1, 3] -> "0, 1, 3"."""
    seeds = sorted(int(s) for s in seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def stability_text(rows: pd.DataFrame) -> str:
    """"k/n" runs stable (and how many collapsed); "-" when no run says."""
    known = [s for s in rows["stable"] if s is not None]
    if not known:
        return "-"
    collapsed = int((rows["status"] == "collapsed").sum())
    return f"{sum(known)}/{len(known)}" + (f" ({collapsed} collapsed)" if collapsed else "")


def fell_text(rows: pd.DataFrame) -> str:
    """"k/n": runs whose final eval is below their own step-0 eval (final < start), of those with both."""
    both = rows[rows["final_eval_success"].notna() & rows["initial_eval_success"].notna()]
    return f"{int((both['final_eval_success'] < both['initial_eval_success']).sum())}/{len(both)}" if len(both) else "-"


def commit_text(rows: pd.DataFrame) -> str:
    """The runs' commit(s); else the commit whose docs recorded them; else "not recorded"."""
    shas = sorted({s[:7] for s in rows["git_sha"] if s})
    if shas:
        return ", ".join(shas)
    recorded = sorted({s for s in rows["recorded_in"] if s})
    return f"recorded in {', '.join(recorded)}" if recorded else "not recorded"


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


def _comparison_columns(d: pd.Series, c: "verdicts.Comparison") -> dict:
    """The statistics of one comparison, as findings.csv holds them."""
    return {"seeds": seeds_text(d.index), "n": c.n, "per_seed": " / ".join(f"{v:+.1f}" for v in d),
            "mean": c.mean, "low": c.low, "high": c.high, "p": c.p, "p_adjusted": c.p_adjusted, "mde": c.mde,
            "verdict": c.verdict, "seeds_needed": c.seeds_needed, "note": c.note}


def _paper_columns(claim: Claim, c: "verdicts.Comparison", confirmed: bool = True) -> dict:
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


def _sweep_columns(rows: pd.DataFrame) -> dict:
    """Where the runs came from: sweep, budget, commit, command."""
    return {"sweep": rows["sweep"].iloc[0], "budget": ", ".join(sorted({b for b in rows["budget"] if b})) or "-",
            "commit": commit_text(rows), "command": next((c for c in rows["command"] if c), "")}


def _missing_row(claim: Claim) -> dict:
    """A comparison that no sweep holds: the command that makes it."""
    return {"kind": "finding", "finding": claim.finding, "comparison": f"{display(claim.arm)} - {display(claim.baseline)}",
            "measure": claim.measure, "paper": claim.paper, "cite": claim.cite, "sweep": "-", "verdict": "no sweep",
            "command": f"arena sweep dimension={claim.dimension}"}


def _collapse_columns(rows: pd.DataFrame, claim: Claim, seeds, verdict: str) -> dict:
    """The collapse counts beside the verdict and the collapse-regime rule (collapse_rule.guarded): rows
    are one sweep's runs; counts over the arm's and the baseline's runs on the paired seeds."""
    arm, base = (rows[(rows["arm"] == a) & rows["seed"].isin(list(seeds))] for a in (claim.arm, claim.baseline))
    n_arm, n_base = measures.collapsed_runs(arm), measures.collapsed_runs(base)
    shown, confirmed = guarded(verdict, n_arm + n_base > 0, measures.collapsed_runs(rows) > 0)
    return {"verdict": shown, "confirmed": confirmed, "collapsed": counts_text(n_arm, len(arm), n_base, len(base))}


def finding_rows(runs: pd.DataFrame, claims: Sequence[Claim], *, min_effect: float = verdicts.MIN_EFFECT) -> pd.DataFrame:
    """One row per (comparison, sweep holding both arms); a comparison no sweep holds gets one row
    naming its command. Holm runs across the comparisons of one finding within one sweep, each on the
    finding's measure (measures.py; runs without the measure columns get them from the runs alone)."""
    if any(measures.column(c.measure) not in runs for c in claims):
        runs = measures.add_measures(runs)
    out = []
    for finding in dict.fromkeys(c.finding for c in claims):
        members = [c for c in claims if c.finding == finding]
        for sweep, rows in runs.groupby("sweep", sort=True):
            # keyed by position: one finding may compare an arm with two baselines, or on two measures
            diffs = {i: paired_differences(rows, c.arm, c.baseline, measures.column(c.measure)) for i, c in enumerate(members)}
            held = {i: d for i, d in diffs.items() if len(d)}
            family = verdicts.compare_family(held, min_effect=min_effect) if held else {}
            for i, c in enumerate(members):
                if i not in family:
                    continue
                pair = rows[rows["arm"].isin([c.arm, c.baseline])]
                collapse = _collapse_columns(rows, c, held[i].index, family[i].verdict)
                out.append({"kind": "finding", "finding": finding, "comparison": f"{display(c.arm)} - {display(c.baseline)}",
                            "measure": c.measure, "paper": c.paper, "cite": c.cite, **_sweep_columns(pair),
                            **_comparison_columns(held[i], family[i]), **collapse,
                            **_paper_columns(c, family[i], collapse["confirmed"]),
                            "stable": f"{stability_text(rows[rows['arm'] == c.arm])} / "
                                      f"{stability_text(rows[rows['arm'] == c.baseline])}",
                            "fell": f"{fell_text(rows[rows['arm'] == c.arm])} / {fell_text(rows[rows['arm'] == c.baseline])}"})
        done = {r["comparison"] for r in out if r["finding"] == finding}
        out += [_missing_row(c) for c in members if f"{display(c.arm)} - {display(c.baseline)}" not in done]
    return pd.DataFrame(out)


def gain_rows(runs: pd.DataFrame, *, min_effect: float = verdicts.MIN_EFFECT) -> pd.DataFrame:
    """One row per (sweep, arm): its gain over its step-0 eval, Holm across the sweep's arms."""
    out = []
    for sweep, rows in runs.groupby("sweep", sort=True):
        arms = list(dict.fromkeys(rows["arm"]))
        g = {arm: gains(rows, arm) for arm in arms}
        held = {arm: s for arm, s in g.items() if len(s)}
        family = verdicts.compare_family(held, min_effect=min_effect) if held else {}
        for arm in held:
            arm_rows = rows[rows["arm"] == arm]
            out.append({"kind": "gain", "comparison": f"{display(arm)} - start", **_sweep_columns(arm_rows),
                        **_comparison_columns(held[arm], family[arm]), "stable": stability_text(arm_rows)})
    return pd.DataFrame(out)


def _num(x, fmt: str = "+.1f") -> str:
    """x in `fmt`; "-" for a missing number; a non-zero x that would print as 0.0 gets two decimals."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    text = format(x, fmt)
    return format(x, fmt.replace(".1f", ".2f")) if x != 0 and float(text) == 0 else text


def _effect(row) -> str:
    """"+21.9 [+2.8, +41.0]" (mean and the family-adjusted interval); "+5.0 [no bound at n=2]" where
    the interval is unbounded (equal differences on too few seeds for the sign-flip test to reach alpha)."""
    if any(isinstance(row[k], float) and math.isinf(row[k]) for k in ("low", "high")):
        return f"{_num(row['mean'])} [no bound at n={int(row['n'])}]"
    return f"{_num(row['mean'])} [{_num(row['low'])}, {_num(row['high'])}]"


def _verdict(row) -> str:
    needed = row.get("seeds_needed")
    more = f" (~{int(needed)} seeds)" if row["verdict"] == verdicts.UNDERPOWERED and pd.notna(needed) else ""
    return row["verdict"] + more


def _md_table(header: Sequence[str], lines: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(x) + " |" for x in lines]


def _finding_lines(findings: pd.DataFrame) -> list[list[str]]:
    lines = []
    for _, r in findings.iterrows():
        if r["verdict"] == "no sweep":
            lines.append([r["finding"], r["comparison"], r["measure"], f"{r['paper']} ({r['cite']})", "-", "-",
                          f"no sweep holds both arms: `{r['command']}`", "-", "-", "-", "-", "-", "-", "-", "-"])
            continue
        where = f"{r['sweep']} (budget {r['budget']}; {r['commit']})"
        lines.append([r["finding"], r["comparison"], r["measure"], f"{r['paper']} ({r['cite']})", where, r["seeds"], _effect(r),
                      r["per_seed"], _num(r["p_adjusted"], ".3f"), _num(r["mde"], ".1f"), _verdict(r), r["collapsed"],
                      r["vs_paper"], r["stable"], r["fell"]])
    return lines


def _sweep_lines(runs: pd.DataFrame) -> list[list[str]]:
    lines = []
    for sweep, rows in runs.groupby("sweep", sort=True):
        sources = "; ".join(dict.fromkeys(s for s in rows["source"] if s)) or "-"
        commands = " / ".join(f"`{c}`" for c in dict.fromkeys(c for c in rows["command"] if c)) or "-"
        budgets = ", ".join(sorted({b for b in rows["budget"] if b})) or "-"
        n_eval = ", ".join(str(int(n)) for n in sorted(set(rows["n_eval"].dropna()))) if "n_eval" in rows else "-"
        lines.append([sweep, budgets, n_eval, str(len(rows)), commit_text(rows), commands, sources])
    return lines


def render_markdown(runs: pd.DataFrame, findings: pd.DataFrame, gain: pd.DataFrame, *,
                    min_effect: float = verdicts.MIN_EFFECT) -> str:
    """The findings table, the gains over the start, and where every sweep came from."""
    rule = (f"paired t over seeds, Holm across the comparisons of one finding in one sweep (family-wise "
            f"alpha {verdicts.ALPHA:g}); the interval is at the family-adjusted level; \"no difference\" needs it inside "
            f"+-{min_effect:g} points, \"underpowered\" says about how many seeds would resolve {min_effect:g} points; "
            f"MDE: the smallest difference found with {verdicts.POWER:.0%} power at these seeds and this spread; "
            f"collapsed: the arm's and the baseline's runs on the paired seeds that collapsed or were unstable; in a "
            f"sweep where some run did, a better/worse whose runs saw none reads \"(no collapse seen)\" and "
            f"is unresolved (docs/methods.md §14, the mixture null)")
    measured = "; ".join(f"{m}: {text}" for m, text in measures.MEASURES.items())
    out = [f"Findings (confirmatory): arm - baseline on the same seed, on the finding's measure (points; {measured}). "
           f"Verdict rule: {rule}.", ""]
    if any("@" in b for b in runs["budget"]):
        out[-1:-1] = ["", "A budget written `<budget>@<hash>` is not today's budget of that name: the hash of its runs' "
                          "settings (config.yaml without seed, PO and arm overrides) differs from today's."]
    out += _md_table(["finding", "comparison", "measure", "paper", "sweep (budget; commit)", "seeds", "d [CI]", "per seed", "p (Holm)", "MDE",
                      "verdict", "collapsed or unstable: arm / baseline", "vs paper", "stable: arm / baseline", "fell below start: arm / baseline"],
                     _finding_lines(findings))
    out += ["", "Gain over the BC start (exploratory: an estimate, no verdict): final - step-0 eval of the same run "
            "(points); the interval and p are Holm-adjusted across the sweep's arms.", ""]
    out += _md_table(["sweep", "arm", "seeds", "gain [CI]", "per seed", "p (Holm)", "MDE", "stable"],
                     [[r["sweep"], r["comparison"].removesuffix(" - start"), r["seeds"], _effect(r), r["per_seed"],
                       _num(r["p_adjusted"], ".3f"), _num(r["mde"], ".1f"), r["stable"]]
                      for _, r in gain.iterrows()])
    out += ["", "Sweeps:", ""]
    out += _md_table(["sweep", "budget", "eval episodes", "runs", "commit", "command", "rows from"], _sweep_lines(runs))
    return "\n".join(out) + "\n"


CSV_COLUMNS = ("kind", "finding", "comparison", "measure", "paper", "cite", "sweep", "budget", "commit", "seeds", "n", "per_seed",
               "mean", "low", "high", "p", "p_adjusted", "mde", "verdict", "seeds_needed", "collapsed", "vs_paper", "paper_points",
               "paper_in_interval", "stable", "fell", "note", "command")


def render_csv(findings: pd.DataFrame, gain: pd.DataFrame) -> str:
    """Both tables as one CSV (kind = finding | gain), numbers to 6 significant digits."""
    import io

    # gains are exploratory: no verdict word, no seeds-needed (which only an unresolved verdict has)
    gain = gain.drop(columns=["verdict", "seeds_needed", "note"], errors="ignore")
    frame = pd.concat([findings, gain], ignore_index=True)
    frame = frame.reindex(columns=list(CSV_COLUMNS))
    frame["seeds_needed"] = frame["seeds_needed"].astype("Int64")
    frame["n"] = frame["n"].astype("Int64")
    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.6g", lineterminator="\n")
    return buf.getvalue()


def build(runs: pd.DataFrame, *, min_effect: float = verdicts.MIN_EFFECT) -> tuple[str, str]:
    """(markdown, csv) of the findings of a runs table."""
    findings = finding_rows(runs, load_claims(), min_effect=min_effect)
    gain = gain_rows(runs, min_effect=min_effect)
    return render_markdown(runs, findings, gain, min_effect=min_effect), render_csv(findings, gain)


def main(args: Sequence[str]) -> int:
    """`arena findings [results_dir=DIR | csv=PATH] [out=DIR] [min_effect=POINTS]` (the keys:
    arena.config.verb_args.FindingsArgs): print the findings table (markdown); with out=DIR also
    write DIR/findings.md and DIR/findings.csv. Bad input raises BadInput (exit 2)."""
    try:
        parsed = parse_own_args(FindingsArgs, args)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    opts = parsed.args
    if "csv" in parsed.given and "results_dir" in parsed.given:
        raise BadInput("give results_dir= (run folders) or csv= (committed run tables), not both")
    try:
        min_effect = float(opts.min_effect)
    except (TypeError, ValueError):
        raise BadInput(f"min_effect={opts.min_effect!r}: valid: a number of points > 0") from None
    if not min_effect > 0:
        raise BadInput(f"min_effect={min_effect:g}: valid: a number of points > 0")
    try:
        runs = read_run_tables(str(opts.csv)) if opts.csv is not None else read_results_dir(str(opts.results_dir))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise BadInput(str(exc)) from exc
    markdown, csv_text = build(runs, min_effect=min_effect)
    print(markdown, end="")
    if opts.out is not None:
        out = Path(str(opts.out))
        atomic_write_text(out / "findings.md", markdown)
        atomic_write_text(out / "findings.csv", csv_text)
        print(f"[findings] wrote {out / 'findings.md'} and {out / 'findings.csv'}")
    return 0
