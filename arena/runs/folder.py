"""The run folder every backend writes (decisions.md §F):

    <out>/config.yaml      resolved config (records the cell's arm)
    <out>/metrics.jsonl    one JSON object per step, each with "step"; each step exactly once
    <out>/summary.json     written atomically and last: its existence is the proof of completion
    <out>/ckpt/            checkpoints
    <out>/error.txt        traceback on failure

Resume rule (issue #4): rows up to the checkpoint's step are kept; rows after it (the lost
part of the run) are dropped, then the rerun appends its own, so every step appears once.
Unlike verl's file logger, the file is never truncated as a whole.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator, Optional

from .atomic import atomic_write_json, atomic_write_text


class RunFolder:
    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        self.ckpt = self.path / "ckpt"
        self.config_file = self.path / "config.yaml"
        self.metrics_file = self.path / "metrics.jsonl"
        self.summary_file = self.path / "summary.json"
        self.error_file = self.path / "error.txt"

    def create(self) -> "RunFolder":
        self.ckpt.mkdir(parents=True, exist_ok=True)
        return self

    # ------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        return self.summary_file.exists()

    def summary(self) -> Optional[dict]:
        return json.loads(self.summary_file.read_text()) if self.done else None

    # ------------------------------------------------------------ writes
    def write_config(self, yaml_text: str) -> None:
        atomic_write_text(self.config_file, yaml_text)

    def truncate_metrics_after(self, step: int) -> int:
        """Keep rows with row['step'] <= step (and drop a torn last line). Returns rows kept."""
        kept = [row for row in self.read_metrics() if row["step"] <= step]
        atomic_write_text(self.metrics_file, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        return len(kept)

    def append_metrics(self, row: dict[str, Any]) -> None:
        if "step" not in row:
            raise ValueError("a metrics row needs a 'step' key")
        clean = {k: _json_number(v) for k, v in row.items()}
        with open(self.metrics_file, "a") as fh:
            fh.write(json.dumps(clean, sort_keys=True) + "\n")
            fh.flush()

    def write_summary(self, summary: dict[str, Any]) -> None:
        if self.error_file.exists():
            self.error_file.unlink()
        atomic_write_json(self.summary_file, summary)

    def write_error(self, text: str) -> None:
        atomic_write_text(self.error_file, text)

    # ------------------------------------------------------------ reads
    def read_metrics(self) -> list[dict]:
        return list(self.iter_metrics())

    def iter_metrics(self) -> Iterator[dict]:
        if not self.metrics_file.exists():
            return
        with open(self.metrics_file) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    return  # a torn last line from a killed writer


def _json_number(v: Any) -> Any:
    """JSON has no NaN/inf: store them as strings so the file stays valid JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v
