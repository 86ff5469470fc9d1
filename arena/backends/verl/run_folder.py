"""The run folder of a verl run (docs/design.md, Run folder): same files and metric keys as
the embedded backend, so sweeps and reports treat both backends alike.

`VerlRunWriter` is fed verl's per-step metrics dict (what `RayPPOTrainer.fit` hands its
`Tracking` logger: `actor/pg_loss`, `actor/ppo_kl`, `critic/score/mean`, `timing_s/step`, ...,
plus the `actor/*` keys our registered loss returns and the `rollout/*`, `train/*`, `filter/*`
keys our agent loop / trainer subclass add). `to_arena_metrics` maps verl's names onto ours:

    actor/kl_loss            -> actor/kl_ref          (k3 to the reference, verl's agg_loss)
    actor/ppo_kl             -> actor/off_policy_kl   (masked mean of old_logp - logp)
    actor/grad_norm          -> actor/grad_norm       (verl logs the norm before clipping)
    actor/entropy            -> actor/entropy
    response_length/mean     -> rollout/response_length
    timing_s/step            -> perf/step_seconds
    val-core/<src>/<m>/mean@<k> (acc or reward) -> eval/success_rate, when eval/* is absent
An arena key already present wins over a mapped verl key. verl's own keys are kept too
(e.g. `actor/pg_loss`, which the collapse check reads). `actor/updates_per_step` =
ppo_epochs * mini-batches per step, given by the caller (verl does not log it).

Resume: `start(resume_step)` keeps the rows up to the checkpoint's step and drops later ones
(all of them when there is no checkpoint: the rerun starts at step 0; RunFolder.reset_metrics).
`finish()` writes summary.json last, atomically.
"""
from __future__ import annotations

import math
import re
import time
from typing import Any, Mapping, Optional

from arena.config import cell_id
from arena.runs.folder import RunFolder
from arena.runs.summary import build_summary
from arena.runs.stability import collapse_reason, run_status

RENAMES = {
    "actor/kl_loss": "actor/kl_ref",
    "actor/ppo_kl": "actor/off_policy_kl",
    "actor/grad_norm": "actor/grad_norm",
    "actor/entropy": "actor/entropy",
    "response_length/mean": "rollout/response_length",
    "timing_s/step": "perf/step_seconds",
}
VAL_SUCCESS = re.compile(r"^val-core/[^/]+/(acc|reward)/mean@\d+$")


def _number(v: Any) -> Any:
    """A metric value as a Python number (verl hands numpy scalars, 0-dim tensors, lists)."""
    if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        return v.item()
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) for x in v):
        return sum(v) / len(v)  # per-micro-batch lists: their mean
    return v


def to_arena_metrics(verl_metrics: Mapping[str, Any], *, updates_per_step: Optional[int] = None) -> dict[str, Any]:
    """verl's step metrics -> a row with our §F keys (module docstring), verl's keys kept."""
    row = {k: _number(v) for k, v in verl_metrics.items()}
    for verl_key, ours in RENAMES.items():
        if verl_key in row and ours not in verl_metrics:
            row[ours] = row[verl_key]
    if "eval/success_rate" not in row:
        val = sorted(k for k in row if VAL_SUCCESS.match(k))
        if val:
            row["eval/success_rate"] = row[val[0]]
    if updates_per_step is not None:
        row["actor/updates_per_step"] = updates_per_step
    return {k: v for k, v in row.items() if isinstance(v, (int, float, bool, str)) or v is None}


class VerlRunWriter:
    def __init__(self, folder: RunFolder, *, total_steps: int, theta: float, min_points: int, n_eval: int,
                 updates_per_step: Optional[int] = None, cell_id: Optional[str] = None,
                 tool_sandbox: Optional[str] = None):
        self.folder = folder
        self.total_steps = total_steps
        self.theta, self.min_points, self.n_eval = theta, min_points, n_eval
        self.updates_per_step = updates_per_step
        self.cell_id = cell_id
        self.tool_sandbox = tool_sandbox  # the sandbox mode in force (None: no tool code), as in summary.json
        self.t_start = time.time()

    def start(self, config_yaml: str, *, resume_step: Optional[int] = None) -> None:
        """Create the folder, write config.yaml; keep the rows up to `resume_step`, or none when
        there is no checkpoint (a rerun from step 0 must not append to a killed run's rows)."""
        self.folder.create()
        self.folder.write_config(config_yaml)
        self.folder.reset_metrics(resume_step)

    def log(self, verl_metrics: Mapping[str, Any], step: int) -> dict[str, Any]:
        """Append one row (mapped keys, with `step`) to metrics.jsonl; returns it."""
        row = to_arena_metrics(verl_metrics, updates_per_step=self.updates_per_step)
        row["step"] = int(step)
        self.folder.append_metrics(row)
        return row

    def finish(self) -> dict[str, Any]:
        """summary.json from metrics.jsonl (stability over eval points, collapse), written last."""
        history = self.folder.read_metrics()
        points = [(r["step"], float(r["eval/success_rate"])) for r in history
                  if isinstance(r.get("eval/success_rate"), (int, float)) and math.isfinite(r["eval/success_rate"])]
        reason = collapse_reason(history, self.total_steps, n_eval=self.n_eval)
        status = run_status(history, reason)
        summary = build_summary(
            status=status, cell_id=self.cell_id, points=points, history=history, total_steps=self.total_steps,
            theta=self.theta, min_points=self.min_points, n_eval=self.n_eval,
            wall_seconds=time.time() - self.t_start, collapse_reason=reason, backend="verl",
            tool_sandbox=self.tool_sandbox,
        )
        self.folder.write_summary(summary)
        return summary


def arena_trainer_kwargs(run_path) -> dict:
    """ArenaRayPPOTrainer's arena arguments (run writer, seed, mini-batch split), from the run
    folder's config.yaml (written first by main.run_training; read in verl's TaskRunner actor,
    which gets only the verl config). Not the PO: the trainer reads that from the verl config's
    `actor.policy_loss` section, the loss's own channel (policy_loss.resolved_po)."""
    from omegaconf import OmegaConf

    run = RunFolder(run_path)
    config_yaml = run.config_file.read_text()
    cfg = OmegaConf.create(config_yaml)
    tool_sandbox = cfg.pop("tool_sandbox", None)  # recorded next to the run config, not part of it (cell id)
    writer = VerlRunWriter(run, total_steps=cfg.steps, theta=cfg.stability.theta, min_points=cfg.stability.min_points,
                           n_eval=cfg.eval.n, cell_id=cell_id(cfg), tool_sandbox=tool_sandbox)
    return {"run_writer": writer, "config_yaml": config_yaml, "seed": int(cfg.seed),
            "num_mini_batches": int(cfg.ppo_num_mini_batches), "mini_batch_turns": cfg.ppo_mini_batch_size}
