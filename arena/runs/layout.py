"""The results layout, owned here and nowhere else (docs/design.md, Run folder):

    <results_dir>/runs/<cell_id>/                    `arena train` without out=
    <results_dir>/sweeps/<name>/manifest.json        (arm, env, seed) -> cell_id, role
    <results_dir>/sweeps/<name>/cells/<cell_id>/     one run folder per cell
    <results_dir>/sweeps/<name>/search/<arm>/<env>/  the stability search's state
    <results_dir>/sweeps/<name>/report/              the report

A run folder holds config.yaml, metrics.jsonl, summary.json, eval_wins/, ckpt/, steps/, policy/ and
error.txt (RunFolder), command.txt and run.log (run_log.py). The trained policy leaves the run as
Hugging Face model folders (model and tokenizer, loadable by `transformers` alone; arena/runs/policy.py):

    <run>/steps/<step>/    the policy at each saved step (every save_freq steps and the last)
    <run>/policy/          the final policy, written before summary.json

`name` and arm names become path parts, so they must be safe names (`check_name`).
"""
from __future__ import annotations

import re
from pathlib import Path

from arena.config import cell_id

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.txt"
COMMAND_FILE = "command.txt"  # the command line of each start (run_log.py)
RUN_LOG_FILE = "run.log"  # what the run printed (run_log.py)
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

# What a summary.json must carry to count as the proof of a finished run (docs/design.md,
# Run folder): values may be null (e.g. no eval point), the keys may not be missing.
SUMMARY_STATUSES = ("done", "collapsed", "no_format")
SUMMARY_FIELDS = ("status", "final_eval_success", "var_last20", "noise_floor", "theta", "stable", "n_eval",
                  "steps", "wall_seconds", "git_sha", "git_dirty", "versions", "host", "slurm_job_id")
# An `arena eval` summary ("kind": "eval"; arena/evaluation/runner.py build_eval_summary) has no
# training curve, so none of the stability fields; a summary without "kind" is a training run's.
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


def run_dir(cfg) -> Path:
    if cfg.out:
        return Path(cfg.out).resolve()
    return Path(cfg.results_dir).resolve() / "runs" / cell_id(cfg)


def sweep_dir(results_dir: str | Path, name: str) -> Path:
    return Path(results_dir).resolve() / SWEEPS_DIR / name


def cell_dir(results_dir: str | Path, name: str, cell_id: str) -> Path:
    return sweep_dir(results_dir, name) / CELLS_DIR / cell_id


def manifest_file(results_dir: str | Path, name: str) -> Path:
    return sweep_dir(results_dir, name) / MANIFEST_FILE


def step_policy_dir(run_path: str | Path, step: int) -> Path:
    """<run>/steps/<step>: the HF model folder of the policy saved at `step`."""
    return Path(run_path) / STEPS_DIR / str(int(step))


def policy_dir(run_path: str | Path) -> Path:
    """<run>/policy: the HF model folder of the run's final policy."""
    return Path(run_path) / POLICY_DIR
