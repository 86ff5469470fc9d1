"""The paper's §5.3 table from eval run folders (docs/eval.md, Report table): one row per
(policy label, paradigm), one column per environment with the success rate in percent and its
95% Wilson interval, and a last column with the mean tokens (prompt + completion, over all
agents and rounds) per episode. Runs of the same row and environment are pooled (their wins
and episodes add up), so an eval split over several first-episode ranges forms one cell.

    p = wins / n,  Wilson 95%: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.96
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Union

from .episodes import success_ci

PathLike = Union[str, Path]


def find_eval_runs(results_dir: PathLike) -> list[Path]:
    """The finished eval run folders under `<results_dir>/evals/` (summary.json present)."""
    return sorted(p.parent for p in (Path(results_dir) / "evals").glob("*/summary.json"))


def eval_cells(run_dirs: Iterable[PathLike]) -> dict[tuple[str, str], dict[str, dict]]:
    """{(label, paradigm): {env: {"wins", "n", "tokens"}}} pooled over the given runs; folders
    without an eval summary.json (`kind: eval`) are skipped."""
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for run in run_dirs:
        summary_file = Path(run) / "summary.json"
        if not summary_file.exists():
            continue
        s = json.loads(summary_file.read_text())
        if s.get("kind") != "eval":
            continue
        n = int(s["n_eval"])
        cell = cells.setdefault((s["label"], s["paradigm"]), {}).setdefault(s["env"], {"wins": 0, "n": 0, "tokens": 0.0})
        cell["wins"] += round(float(s["final_eval_success"]) * n)
        cell["n"] += n
        cell["tokens"] += float(s["tokens_per_episode"]) * n
    return cells


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
    from arena.runs import atomic_write_text

    atomic_write_text(out, eval_table(find_eval_runs(results_dir)))
    return Path(out)
