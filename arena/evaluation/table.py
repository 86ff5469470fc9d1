"""The paper's §5.3 table from eval run folders (docs/eval.md, Report table): one row per
(policy label, paradigm), one column per environment with the success rate in percent and its
95% Wilson interval, and a last column with the mean tokens (prompt + completion, over all
agents and rounds) per episode. Only runs of identical eval configs are pooled (the same
`pool_id`: eval_id without the first episode), so an eval split over several first-episode
ranges forms one cell, and each episode index counts once however many runs played it (read
from the episode records, which name their eval). Under one label, evals of other configs
(another endpoint, temperature, ...) get rows of their own, the label followed by their
pool_id. A run whose summary names no pool_id (older arena) is a pool of its own.

    p = wins / n,  Wilson 95%: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.96
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Union

from arena.cli_errors import EXIT_OK, print_bad_input
from arena.config.verb_grammar import Parsed
from arena.io.atomic import atomic_write_text
from arena.runs.layout import SUMMARY_FILE, Results

from .episodes import load_cached, success_ci

PathLike = Union[str, Path]


def find_eval_runs(results_dir: PathLike) -> list[Path]:
    """The finished eval run folders under `<results_dir>/evals/` (summary.json present)."""
    return [p.parent for p in Results(results_dir).eval_summaries()]


def eval_cells(run_dirs: Iterable[PathLike]) -> dict[tuple[str, str], dict[str, dict]]:
    """{(row label, paradigm): {env: {"wins", "n", "tokens"}}} pooled over the given runs (module
    docstring); folders without an eval summary.json (`kind: eval`) are skipped."""
    pools: dict[tuple, dict] = {}  # (label, paradigm, env, pool) -> {episode key: (won, tokens)}
    for run in run_dirs:
        summary_file = Path(run) / SUMMARY_FILE
        if not summary_file.exists():
            continue
        s = json.loads(summary_file.read_text())
        if s.get("kind") != "eval":
            continue
        pool = s.get("pool_id") or s.get("eval_id") or Path(run).name
        episodes = pools.setdefault((s["label"], s["paradigm"], s["env"], pool), {})
        episodes.update({k: v for k, v in run_episodes(Path(run), s).items() if k not in episodes})
    per_label: dict[tuple[str, str], set] = {}
    for label, paradigm, _, pool in pools:
        per_label.setdefault((label, paradigm), set()).add(pool)
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for (label, paradigm, env, pool), episodes in pools.items():
        row = label if len(per_label[(label, paradigm)]) == 1 else f"{label} ({pool[:8]})"
        cell = cells.setdefault((row, paradigm), {}).setdefault(env, {"wins": 0, "n": 0, "tokens": 0.0})
        cell["wins"] += sum(won for won, _ in episodes.values())
        cell["n"] += len(episodes)
        cell["tokens"] += sum(tokens for _, tokens in episodes.values())
    return cells


def run_episodes(run: Path, summary: dict) -> dict:
    """{episode key: (won 0/1, tokens)} of one finished eval: its episode records of its eval id
    in its range [first_episode, first_episode + n_eval); a run without records (older arena)
    gives n_eval entries keyed by the run, from its summary's rate and mean tokens."""
    n, first = int(summary["n_eval"]), summary.get("first_episode")
    records = load_cached(run, summary.get("eval_id")) if summary.get("eval_id") else {}
    wanted = range(int(first), int(first) + n) if first is not None else range(0)
    if records and all(i in records for i in wanted):
        return {i: (int(bool(records[i]["won"])), float(records[i]["prompt_tokens"] + records[i]["completion_tokens"]))
                for i in wanted}
    wins, tokens = round(float(summary["final_eval_success"]) * n), float(summary["tokens_per_episode"])
    return {(str(run.resolve()), k): (int(k < wins), tokens) for k in range(n)}


def format_cell(wins: int, n: int) -> str:
    """"12.5 [4.3, 31.0]": success and its 95% Wilson interval, in percent."""
    low, high = success_ci(wins, n)
    return f"{100 * wins / n:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def eval_table(run_dirs: Iterable[PathLike]) -> str:
    """The markdown table (module docstring); rows sorted by label then paradigm."""
    cells = eval_cells(run_dirs)
    envs = sorted({env for row in cells.values() for env in row})
    header = ["policy", "paradigm", *[f"{env} success % [95% CI] (n)" for env in envs], "tokens / episode"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (label, paradigm), row in sorted(cells.items()):
        entries = [f"{format_cell(row[e]['wins'], row[e]['n'])} ({row[e]['n']})" if e in row else "—" for e in envs]
        episodes = sum(c["n"] for c in row.values())
        tokens = sum(c["tokens"] for c in row.values()) / episodes
        lines.append("| " + " | ".join([label, paradigm, *entries, f"{tokens:.0f}"]) + " |")
    return "\n".join(lines) + "\n"


def write_eval_table(results_dir: PathLike, out: PathLike) -> Path:
    """Write the table of every eval under `<results_dir>/evals/` to `out` (markdown)."""
    atomic_write_text(out, eval_table(find_eval_runs(results_dir)))
    return Path(out)


def report_main(parsed: Parsed) -> int:
    """`arena report evals=true [results_dir=...]` (the report verb's keys, parsed by the CLI):
    write `<results_dir>/evals/report.md` and print it; exit 0, or 2 when another key is given."""
    extra = parsed.given - {"evals", "results_dir"}
    if extra:
        return print_bad_input("report", f"evals=true takes only results_dir; got {', '.join(sorted(extra))}")
    results = Results(str(parsed.args.results_dir))
    out = write_eval_table(results.root, results.eval_table)
    print(out.read_text())
    print(f"[report] written to {out}")
    return EXIT_OK
