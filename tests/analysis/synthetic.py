"""A synthetic sweep with known numbers: run folders + manifest (docs/design.md, Run folder).

SCORES[arm][env] = final eval success per seed 0, 1, 2; None = no score (see STATUS).
STATUS overrides the default "done" for some (arm, env, seed).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from arena.config.schema import RunConfig
from arena.runs.folder import RunFolder

NAME = "synthetic"
SHA = "a1b2c3d"
ENVS = ("sokoban", "household")
GRID = ("grpo", "gspo", "grpo_4mb", "sampo")  # grid order; the table groups by preset group
ARMS = {  # arm -> (method, overrides)
    "grpo": ("grpo", {}),
    "gspo": ("gspo", {}),
    "grpo_4mb": ("grpo", {"ppo_num_mini_batches": 4}),
    "sampo": ("sampo", {}),
}
SCORES = {
    "grpo": {"sokoban": [0.40, 0.50, 0.60], "household": [0.05, 0.05, 0.08]},
    "gspo": {"sokoban": [0.55, 0.65, 0.75], "household": [0.10, 0.20, 0.30]},
    "grpo_4mb": {"sokoban": [0.30, 0.50, None], "household": [0.02, None, 0.08]},
    "sampo": {"sokoban": [0.80, 0.80, 0.90], "household": [0.50, 0.60, 0.70]},
}
STATUS = {("grpo_4mb", "sokoban", 2): "failed", ("grpo_4mb", "household", 1): "missing",
          ("sampo", "sokoban", 2): "collapsed"}
STABLE = {("gspo", "sokoban", 1): "unresolved", ("sampo", "sokoban", 2): False}
CHOSEN = {("gspo", "sokoban"): {"hp": {"eps_low": 0.003, "eps_high": 0.004}, "trial": 2}}
INITIAL = {"sokoban": 0.50, "household": 0.05}  # step-0 eval (the shared BC start) of every run on the env
STEPS = 10
SEARCH_SCORE = 0.99  # a search cell: must never reach the table


def _metrics(final: float, initial: float, seed: int, step: int) -> dict[str, Any]:
    frac = step / STEPS
    row = {"step": step, "train/success_rate": final * frac, "actor/off_policy_kl": 0.001 * (1 + seed) * frac,
           "actor/kl_ref": 0.01 * frac, "actor/grad_norm": 1.0 + 0.1 * seed, "actor/entropy": 1.0 - 0.5 * frac,
           "actor/clipfrac_pos_adv": 0.02 * frac, "actor/clipfrac_neg_adv": 0.01 * frac,
           "actor/masked_seqs": float(seed), "rollout/format_valid_ratio": 0.9 + 0.01 * step}
    if step in (0, 8, 9, 10):
        row["eval/success_rate"] = final if step == STEPS else initial + (final - initial) * frac
    return row


def write_cell(root: Path, *, name: str, arm: str, env: str, seed: int, role: str, final: Optional[float],
               status: str = "done", stable: Any = True, sha: str = SHA) -> dict[str, Any]:
    method, overrides = ARMS[arm]
    cell_id = f"{arm}-{env}-s{seed}-{role}"
    cell = {"arm": arm, "env": env, "seed": seed, "cell_id": cell_id, "role": role, "method": method,
            "overrides": overrides}
    if status == "missing":
        return cell
    run = RunFolder(root / "sweeps" / name / "cells" / cell_id).create()
    cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), {"env": {"name": env}, "po": {"method": method},
                                                            "seed": seed, "arm": arm, "name": name, "steps": STEPS, **overrides})
    run.write_config(OmegaConf.to_yaml(cfg))
    last = STEPS if status == "done" else STEPS - 1
    for step in range(last + 1):
        run.append_metrics(_metrics(final if final is not None else 0.0, INITIAL[env], seed, step))
    if status == "failed":
        run.write_error("Traceback: synthetic failure\n")
        return cell
    var = 0.0001 * (1 + seed)
    run.write_summary({"status": status, "cell_id": cell_id, "final_eval_success": final, "initial_eval_success": INITIAL[env],
                       "var_last20": var, "noise_floor": final * (1 - final) / 256, "theta": 0.0025, "stable": stable,
                       "n_eval": 256, "steps": last, "wall_seconds": 1.0, "git_sha": sha, "git_dirty": False,
                       "versions": {"arena": "0.1.0"}, "host": "synthetic", "slurm_job_id": None})
    return cell


def build_sweep(root: str | Path, *, name: str = NAME, shas: Optional[dict] = None) -> Path:
    """Write the synthetic sweep under root/sweeps/<name>/; `shas` maps (arm, env, seed) -> a SHA."""
    root = Path(root)
    shas = shas or {}
    cells = []
    for arm in GRID:
        for env in ENVS:
            for seed, final in enumerate(SCORES[arm][env]):
                key = (arm, env, seed)
                cells.append(write_cell(root, name=name, arm=arm, env=env, seed=seed, role="report", final=final,
                                        status=STATUS.get(key, "done"), stable=STABLE.get(key, True),
                                        sha=shas.get(key, SHA)))
    cells.append(write_cell(root, name=name, arm="gspo", env="sokoban", seed=100, role="search", final=SEARCH_SCORE))
    for (arm, env), chosen in CHOSEN.items():
        path = root / "sweeps" / name / "search" / arm / env / "chosen.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(chosen, sort_keys=True))
    manifest = {"name": name, "dimension": "clipping", "grid": list(GRID), "cells": cells}
    (root / "sweeps" / name / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return root / "sweeps" / name


def claims_on_final():
    """findings.yaml's claims, each compared on the final eval success. The tests of Holm families and
    of the paper comparison derive their numbers on final success by hand; a finding that
    findings.yaml compares on a fall (`collapsed`: more falls is +1) has the opposite direction on
    final success (more falls, a lower final), so its sign flips."""
    from dataclasses import replace

    from arena.analysis.claims import load_claims

    return [c if c.measure == "final" else replace(c, measure="final", sign=None if c.sign is None else -c.sign)
            for c in load_claims()]
