"""The results layout, owned here and nowhere else (docs/design.md, Run folder). Every path under a
results_dir comes from one `Results` object (a resolved results_dir):

    <results_dir>/runs/<cell_id>/                    `arena train` without out=        Results.run
    <results_dir>/sweeps/<name>/                     one sweep                          Results.sweep
    <results_dir>/sweeps/<name>/manifest.json        (arm, env, seed) -> cell_id, role  Results.manifest
    <results_dir>/sweeps/<name>/cells/<cell_id>/     one run folder per cell            Results.cell
    <results_dir>/sweeps/<name>/search/<arm>/<env>/  the stability search's state       Results.search
        .../chosen.json                              the search's choice                Results.chosen
    <results_dir>/sweeps/<name>/report/              the report                         Results.report
    <results_dir>/sweeps/<name>/jobs/                the launcher's job logs and queues Results.jobs
    <results_dir>/evals/<eval_id>/                   one `arena eval` run folder        Results.eval_run
    <results_dir>/evals/report.md                    the table of every eval            Results.eval_table
    <results_dir>/bc/<bc_hash>/{model/,bc.json}      a cached BC checkpoint, its report Results.bc, bc_model, bc_report
    <results_dir>/bc/<bc_hash>.lock                  held while that checkpoint trains  Results.bc_lock

and the globs: every sweep's manifest (Results.sweep_manifests), every sweep's cell folders
(Results.all_cells), every finished eval's summary.json (Results.eval_summaries).

A run folder holds config.yaml, metrics.jsonl, summary.json, eval_wins/, ckpt/, steps/, policy/ and
error.txt (RunFolder), command.txt and run.log (run_log.py), and copied_from.json in a sweep cell
copied from another sweep that finished it (arena/sweeps/twins.py). The trained policy leaves the run as
Hugging Face model folders (model and tokenizer, loadable by `transformers` alone; arena/runs/policy.py):

    <run>/steps/<step>/    the policy at each saved step (every save_freq steps and the last)
    <run>/policy/          the final policy, written before summary.json

`name` and arm names become path parts, so they must be safe names (`check_name`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from arena.config import cell_id

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.txt"
COMMAND_FILE = "command.txt"  # the command line of each start (run_log.py)
RUN_LOG_FILE = "run.log"  # what the run printed (run_log.py)
COPIED_FROM_FILE = "copied_from.json"  # a sweep cell copied from another sweep (arena/sweeps/twins.py)
WANDB_ID_FILE = "wandb_id.txt"  # the run folder's W&B run id, random, made once (wandb_log.py)
WANDB_DIR = "wandb"  # W&B's own files (an offline run) in a run folder
CKPT_DIR = "ckpt"
STEPS_DIR = "steps"  # <step>/: the HF model folder of each saved step
POLICY_DIR = "policy"  # the HF model folder of the final policy
HF_CONFIG_FILE = "config.json"  # what makes a folder an HF model folder
EVAL_WINS_DIR = "eval_wins"  # <step>.json: which held-out episodes an eval won (embedded backend)
MANIFEST_FILE = "manifest.json"
CELLS_DIR = "cells"
SEARCH_DIR = "search"
REPORT_DIR = "report"
SWEEPS_DIR = "sweeps"
RUNS_DIR = "runs"
JOBS_DIR = "jobs"  # sweeps/<name>/jobs: the launcher's folder (submitit logs, the local pool's queues)
CHOSEN_FILE = "chosen.json"  # search/<arm>/<env>/chosen.json: the stability search's choice
EVALS_DIR = "evals"
EVAL_TABLE_FILE = "report.md"  # evals/report.md: `arena report evals=true`
BC_DIR = "bc"
BC_MODEL_DIR = "model"  # bc/<hash>/model: the BC checkpoint (an HF model folder)
BC_REPORT_FILE = "bc.json"  # bc/<hash>/bc.json: its report, written last (the proof it is whole)

# What a summary.json must carry to count as the proof of a finished run (docs/design.md,
# Run folder): values may be null (e.g. no eval point), the keys may not be missing.
SUMMARY_STATUSES = ("done", "collapsed", "no_format")
SUMMARY_FIELDS = ("status", "final_eval_success", "var_last20", "noise_floor", "theta", "stable", "n_eval",
                  "steps", "wall_seconds", "git_sha", "git_dirty", "versions", "host", "slurm_job_id")
# An `arena eval` summary ("kind": "eval"; arena/evaluation/runner.py build_eval_summary) has no
# training curve, so none of the stability fields. A training run's says "kind": "train"
# (arena/runs/summary.py build_summary); one without "kind" (an older arena's) reads as a training run's.
EVAL_SUMMARY_FIELDS = ("status", "kind", "eval_id", "final_eval_success", "n_eval", "first_episode", "steps",
                       "wall_seconds", "git_sha", "git_dirty", "versions", "host", "slurm_job_id")
SUMMARY_FIELDS_BY_KIND = {"train": SUMMARY_FIELDS, "eval": EVAL_SUMMARY_FIELDS}

# A name used as one path part: letters, digits, '.', '_', '-', '+', '=', ',' ; not starting
# with '.' or '-' (no hidden folders, no "..", no option-looking names), at most 100 characters.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=,-]{0,99}")
SAFE_NAME_RULE = ("letters, digits and . _ - + = , (at most 100 characters, not starting with '.' or '-', "
                  "no '/')")


def check_name(key: str, value: object) -> str:
    """`value` when it is a safe single path part, else ValueError naming `key` and the rule."""
    text = "" if value is None else str(value)
    if not SAFE_NAME.fullmatch(text):
        raise ValueError(f"{key}={text!r} is not a valid name; valid: {SAFE_NAME_RULE}")
    return text


@dataclass(frozen=True)
class Results:
    """Every path under one results_dir (module docstring); `root` is resolved on creation, so
    two Results of the same folder are equal and every path they give is absolute."""
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())

    @classmethod
    def of(cls, cfg) -> "Results":
        """The Results of a run config's `results_dir`."""
        return cls(cfg.results_dir)

    def run(self, cell: str) -> Path:
        return self.root / RUNS_DIR / cell

    @property
    def sweeps(self) -> Path:
        return self.root / SWEEPS_DIR

    def sweep(self, name: str) -> Path:
        return self.sweeps / name

    def manifest(self, name: str) -> Path:
        return self.sweep(name) / MANIFEST_FILE

    def cells(self, name: str) -> Path:
        return self.sweep(name) / CELLS_DIR

    def cell(self, name: str, cell: str) -> Path:
        return self.cells(name) / cell

    def search(self, name: str, arm: str, env: str) -> Path:
        return self.sweep(name) / SEARCH_DIR / arm / env

    def chosen(self, name: str, arm: str, env: str) -> Path:
        return self.search(name, arm, env) / CHOSEN_FILE

    def report(self, name: str) -> Path:
        return self.sweep(name) / REPORT_DIR

    def jobs(self, name: str) -> Path:
        return self.sweep(name) / JOBS_DIR

    @property
    def evals(self) -> Path:
        return self.root / EVALS_DIR

    def eval_run(self, eval_id: str) -> Path:
        return self.evals / eval_id

    @property
    def eval_table(self) -> Path:
        return self.evals / EVAL_TABLE_FILE

    def bc(self, bc_hash: str) -> Path:
        return self.root / BC_DIR / bc_hash

    def bc_model(self, bc_hash: str) -> Path:
        return self.bc(bc_hash) / BC_MODEL_DIR

    def bc_report(self, bc_hash: str) -> Path:
        return self.bc(bc_hash) / BC_REPORT_FILE

    def bc_lock(self, bc_hash: str) -> Path:
        """bc/<hash>.lock: held by the one process training that checkpoint."""
        return self.bc(bc_hash).with_name(f"{bc_hash}.lock")

    def sweep_manifests(self) -> list[Path]:
        """Every sweep's manifest.json, sorted (none when there is no sweeps/ folder)."""
        return sorted(self.sweeps.glob(f"*/{MANIFEST_FILE}"))

    def all_cells(self) -> list[Path]:
        """Every cell folder of every sweep, sorted."""
        return sorted(self.sweeps.glob(f"*/{CELLS_DIR}/*"))

    def eval_summaries(self) -> list[Path]:
        """The summary.json of every finished `arena eval` run folder under evals/, sorted."""
        return sorted(self.evals.glob(f"*/{SUMMARY_FILE}"))


def run_dir(cfg) -> Path:
    """`out`, else <results_dir>/runs/<cell_id>: the folder `arena train` writes (both backends)."""
    if cfg.out:
        return Path(cfg.out).resolve()
    return Results.of(cfg).run(cell_id(cfg))


def step_policy_dir(run_path: str | Path, step: int) -> Path:
    """<run>/steps/<step>: the HF model folder of the policy saved at `step`."""
    return Path(run_path) / STEPS_DIR / str(int(step))


def policy_dir(run_path: str | Path) -> Path:
    """<run>/policy: the HF model folder of the run's final policy."""
    return Path(run_path) / POLICY_DIR
