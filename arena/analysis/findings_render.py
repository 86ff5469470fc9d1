"""`arena findings`' text: the words and numbers of its rows (arms as the paper writes them, seeds,
stability, commits) and the two renderings of its tables, markdown (findings.md) and CSV
(findings.csv)."""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from . import measures, verdicts

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
                    min_effect: float = verdicts.MIN_EFFECT, levels: dict[str, dict] | None = None) -> str:
    """The findings table, the gains over the start, and where every sweep came from (`levels`: the
    seeds=auto sweeps' judging levels, findings.finding_rows')."""
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
    where = "docs/design.md, Sweep: seeds=auto"
    for sweep, level in sorted((levels or {}).items()):
        how = level["bound"].describe() if "bound" in level else f"alpha {level['alpha']:g} per look (Bonferroni over its looks)"
        out[-1:-1] = ["", f"Sweep `{sweep}` ran seeds=auto: its verdicts are judged under {how} ({where})."]
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

