"""The run folder every backend writes (docs/design.md, Run folder; names in layout.py):

    <out>/config.yaml      resolved config (records the cell's arm)
    <out>/metrics.jsonl    one JSON object per step, keyed by "step"; a step is written at most once
    <out>/summary.json     written atomically and last: the proof of completion when it parses
                           and carries every key of its kind (SUMMARY_FIELDS_BY_KIND)
    <out>/ckpt/            checkpoints (training state, to resume)
    <out>/steps/<step>/    the policy of each saved step, an HF model folder (arena/runs/policy.py)
    <out>/policy/          the final policy, an HF model folder, written before summary.json
    <out>/error.txt        traceback on failure

Rules for metrics.jsonl:
  - a torn last line (no newline at the end: the writer was killed mid-row) is dropped, with a
    warning; a bad line anywhere else, or a step written twice, is a MetricsFileError naming
    the file and line, and nothing is deleted;
  - a resume keeps the rows up to the last checkpoint's step, or none when there is no
    checkpoint (`reset_metrics`), and says so; the rerun then appends its own rows;
  - every append is fsynced, so the rows up to a checkpoint survive with it.
A summary.json that does not parse, lacks fields, holds values of the wrong kind, or (in a
sweep cell) names another cell's id is not a proof: `set_aside_summary` moves it
to `summary.json.corrupt-<time>` (kept, not deleted) so the cell runs again.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from omegaconf import OmegaConf

from arena.config import cell_id
from arena.io.atomic import append_text, atomic_write_json, atomic_write_text, fsync_dir
from arena.io.faults import crash_point

from .layout import (CKPT_DIR, CONFIG_FILE, ERROR_FILE, EVAL_WINS_DIR, METRICS_FILE, SUMMARY_FIELDS_BY_KIND,
                     SUMMARY_FILE, SUMMARY_STATUSES, policy_dir, step_policy_dir)

logger = logging.getLogger(__name__)


class MetricsFileError(ValueError):
    """metrics.jsonl holds a bad line that is not a torn last line, or a step twice."""


def summary_problem(path: Path, expect_cell_id: Optional[str] = None) -> Optional[str]:
    """None when `path` is a valid summary.json, else why not (names the file). Valid: a JSON
    object with every key its kind requires (SUMMARY_FIELDS_BY_KIND: a training run's, or an
    eval's), a known status, values of the right kind
    (`summary_value_problem`) and, when `expect_cell_id` is given and the summary names a
    cell_id, that one (a run folder copied from another cell is not this cell's proof)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return f"{path} does not exist"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"{path} is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return f"{path} holds a {type(data).__name__}, not a JSON object"
    kind = data.get("kind", "train")
    if kind not in SUMMARY_FIELDS_BY_KIND:
        return f"{path} has kind {kind!r}; valid: {', '.join(SUMMARY_FIELDS_BY_KIND)}"
    missing = [k for k in SUMMARY_FIELDS_BY_KIND[kind] if k not in data]
    if missing:
        return f"{path} lacks {', '.join(missing)}"
    if data["status"] not in SUMMARY_STATUSES:
        return f"{path} has status {data['status']!r}; valid: {', '.join(SUMMARY_STATUSES)}"
    bad = summary_value_problem(data)
    if bad:
        return f"{path}: {bad}"
    if expect_cell_id is None:
        return None
    owner = summary_owner(data, Path(path).parent)
    if owner is None:
        return (f"{path} names no cell_id and its folder's {CONFIG_FILE} cannot be hashed to one: "
                f"no proof that it is cell {expect_cell_id}'s")
    if owner != expect_cell_id:
        return f"{path} is the summary of cell {owner}, not of {expect_cell_id} (a run folder copied from elsewhere?)"
    return None


def summary_owner(data: dict, folder: Path) -> Optional[str]:
    """The cell a summary belongs to: its `cell_id`, or, for a summary written before summaries
    named their cell, the hash of the folder's config.yaml (the cell id is that hash:
    arena.config.cell_id). None when neither can be read."""
    if data.get("cell_id") is not None:
        return str(data["cell_id"])
    try:
        return cell_id(OmegaConf.load(folder / CONFIG_FILE))
    except Exception as exc:  # missing, unparsable or not a run config: no owner to name
        logger.warning("cannot hash %s to a cell id: %s", folder / CONFIG_FILE, exc)
        return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def summary_value_problem(data: dict) -> Optional[str]:
    """Why a summary's values are not what build_summary writes, or None. Null is allowed
    everywhere (no eval point); a score is a number in [0, 1], steps and n_eval integers >= 0,
    wall_seconds a number >= 0, stable true | false | "unresolved"."""
    for key in ("final_eval_success", "initial_eval_success"):
        v = data.get(key)
        if v is not None and not (_number(v) and 0.0 <= v <= 1.0):
            return f"{key}={v!r}; valid: null or a number in [0, 1]"
    for key in ("steps", "n_eval"):
        v = data.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            return f"{key}={v!r}; valid: null or an integer >= 0"
    v = data.get("wall_seconds")
    if v is not None and not (_number(v) and v >= 0):
        return f"wall_seconds={v!r}; valid: null or a number >= 0"
    for key in ("var_last20", "noise_floor", "theta"):
        v = data.get(key)
        if v is not None and not _number(v):
            return f"{key}={v!r}; valid: null or a finite number"
    if data.get("stable") not in (None, True, False, "unresolved"):
        return f"stable={data.get('stable')!r}; valid: true, false, \"unresolved\" or null"
    return None


class RunFolder:
    def __init__(self, path: str | Path, *, expect_cell_id: Optional[str] = None):
        """`expect_cell_id`: the cell this folder is for (a sweep cell's folder name); a summary
        naming another cell is then no proof of this one (summary_problem)."""
        self.path = Path(path).resolve()
        self.expect_cell_id = expect_cell_id
        self.ckpt = self.path / CKPT_DIR
        self.policy = policy_dir(self.path)  # the final policy's HF folder
        self.config_file = self.path / CONFIG_FILE
        self.metrics_file = self.path / METRICS_FILE
        self.summary_file = self.path / SUMMARY_FILE
        self.error_file = self.path / ERROR_FILE
        self.eval_wins_dir = self.path / EVAL_WINS_DIR
        self._steps: Optional[set[int]] = None  # steps in metrics.jsonl, loaded on the first append

    def create(self) -> "RunFolder":
        self.ckpt.mkdir(parents=True, exist_ok=True)
        return self

    def start(self, log: Callable[[str], Any] = print) -> bool:
        """The run start of both backends (docs/design.md, Run folder), once the config is known
        to train here: an unreadable summary.json is set aside (no proof: the run goes again,
        from its checkpoint) and `log` says so; True when the run is done already (a valid
        summary.json: `log` says so, and the caller trains nothing), else False. It makes no
        folder: a start that fails after it (verl: no GPU here) leaves none behind where there
        was none; the first write makes it (`create`)."""
        aside = self.set_aside_summary()
        if aside is not None:
            log(f"[train] {self.summary_file.name} was unreadable; kept as {aside.name}, running the cell again")
        if self.done:
            log(f"[train] already done: {self.summary_file}")
            return True
        return False

    def step_policy(self, step: int) -> Path:
        """The HF folder of the policy saved at `step` (<run>/steps/<step>)."""
        return step_policy_dir(self.path, step)

    # ------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        return self.summary_problem() is None

    def summary_problem(self) -> Optional[str]:
        return summary_problem(self.summary_file, self.expect_cell_id)

    def foreign_cell(self) -> Optional[str]:
        """The other cell id a parseable summary.json names when this folder expects another
        one (a run folder copied from another cell or sweep), else None."""
        if self.expect_cell_id is None:
            return None
        try:
            data = json.loads(self.summary_file.read_text())
        except (OSError, ValueError):
            return None
        owner = summary_owner(data, self.path) if isinstance(data, dict) else None
        return owner if owner not in (None, self.expect_cell_id) else None

    def summary(self) -> Optional[dict]:
        """The summary when the run is done, else None (also for a corrupt summary.json)."""
        if not self.done:
            return None
        return json.loads(self.summary_file.read_text())

    def set_aside_summary(self) -> Optional[Path]:
        """Move a present but invalid summary.json to summary.json.corrupt-<time>; where it went."""
        if not self.summary_file.exists() or self.done:
            return None
        target = self.path / f"{SUMMARY_FILE}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        os.replace(self.summary_file, target)
        fsync_dir(self.path)
        logger.warning("set aside an unreadable %s as %s", self.summary_file, target.name)
        return target

    # ------------------------------------------------------------ writes
    def write_config(self, yaml_text: str) -> None:
        """config.yaml = `yaml_text` (the resolved run config)."""
        atomic_write_text(self.config_file, yaml_text)

    def reset_metrics(self, step: Optional[int]) -> tuple[int, int]:
        """Resume: keep the rows with row['step'] <= step (none when step is None: no checkpoint)
        and drop a torn last line. Raises MetricsFileError (deleting nothing) on any other bad
        line. Returns (rows kept, rows dropped)."""
        rows = self.read_metrics()
        kept = [r for r in rows if step is not None and r["step"] <= step]
        if len(kept) != len(rows) or self._torn_tail() is not None:
            atomic_write_text(self.metrics_file, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        self._steps = {r["step"] for r in kept}
        return len(kept), len(rows) - len(kept)

    def truncate_metrics_after(self, step: Optional[int]) -> int:
        """reset_metrics(step)'s rows kept (the name the verl writer uses)."""
        return self.reset_metrics(step)[0]

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one row; ValueError if it has no int 'step' or its step is in the file already."""
        step = row.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"a metrics row needs an integer 'step' key; got {step!r}")
        if self._steps is None:
            self._steps = {r["step"] for r in self.read_metrics()}
            self._end_last_line()
        if step in self._steps:
            raise ValueError(f"{self.metrics_file}: step {step} is written already (a step is written at most once)")
        clean = {k: _json_number(v) for k, v in row.items()}
        append_text(self.metrics_file, json.dumps(clean, sort_keys=True) + "\n", fsync=True)  # never through a symlink
        self._steps.add(step)
        crash_point(METRICS_FILE)

    def write_summary(self, summary: dict[str, Any]) -> None:
        if self.error_file.exists():
            self.error_file.unlink()
        atomic_write_json(self.summary_file, summary)

    def write_error(self, text: str) -> None:
        atomic_write_text(self.error_file, text)

    def write_eval_wins(self, step: int, wins: list[int]) -> None:
        """eval_wins/<step>.json: {"step", "n", "wins"}, wins[i] = 1 if the eval won held-out
        episode i (eval_seed(i)), as a string of 0/1. A resumed run that evaluates the step
        again replaces the file (atomic)."""
        self.eval_wins_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.eval_wins_dir / f"{step}.json",
                          {"step": step, "n": len(wins), "wins": "".join("1" if w else "0" for w in wins)})

    def read_eval_wins(self, step: int) -> Optional[list[int]]:
        """The wins written for `step`, or None when there is no readable file."""
        try:
            return [int(c) for c in json.loads((self.eval_wins_dir / f"{step}.json").read_text())["wins"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------ reads
    def read_metrics(self) -> list[dict]:
        return list(self.iter_metrics())

    def iter_metrics(self) -> Iterator[dict]:
        """The rows in file order (module docstring: torn last line dropped, else errors)."""
        if not self.metrics_file.exists():
            return
        data = self.metrics_file.read_bytes()
        lines = data.split(b"\n")
        seen: dict[int, int] = {}
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            last = number == len(lines)  # no newline after it: the only line a kill can tear
            try:
                row = json.loads(raw)
            except ValueError as exc:
                if last:
                    logger.warning("%s: dropped a torn last line %d (a killed writer's half row)",
                                   self.metrics_file, number)
                    return
                raise MetricsFileError(f"{self.metrics_file}, line {number}: not a JSON row ({exc}); "
                                       "fix or remove that line (nothing was deleted)") from exc
            if not isinstance(row, dict) or not isinstance(row.get("step"), int) or isinstance(row.get("step"), bool):
                raise MetricsFileError(f"{self.metrics_file}, line {number}: a row must be a JSON object with an "
                                       f"integer 'step'; got {raw[:80]!r}")
            if row["step"] in seen:
                raise MetricsFileError(f"{self.metrics_file}, line {number}: step {row['step']} again (first at line "
                                       f"{seen[row['step']]}); a step is written at most once")
            seen[row["step"]] = number
            yield row

    def _end_last_line(self) -> None:
        """Before appending: a complete last row without its newline gets one; a torn half row
        (already dropped by read_metrics, with a warning) is cut off, so the next row is not
        glued onto it."""
        start = self._torn_tail()
        if start is None:
            return
        tail = self.metrics_file.read_bytes()[start:]
        try:
            json.loads(tail)
        except ValueError:
            os.truncate(self.metrics_file, start)
            return
        with open(self.metrics_file, "ab") as fh:
            fh.write(b"\n")

    def _torn_tail(self) -> Optional[int]:
        """The byte offset where a torn last line starts, or None (file ends in a newline)."""
        try:
            data = self.metrics_file.read_bytes()
        except FileNotFoundError:
            return None
        if not data or data.endswith(b"\n"):
            return None
        return data.rfind(b"\n") + 1


def _json_number(v: Any) -> Any:
    """JSON has no NaN/inf: store them as strings so the file stays valid JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v
