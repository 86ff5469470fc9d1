"""`ArenaRayPPOTrainer`: verl 0.9.1's `RayPPOTrainer` with per-turn rows (docs/methods.md §2).

The run's resolved PO reaches the trainer through ONE channel, verl's own config: the
`actor_rollout_ref.actor.policy_loss` section the workers' loss reads (policy_loss.py,
`resolved_po`). The trainer asks the composer for what it computes on the driver (the filtering
of a step, the advantages' hyperparameters, the adv/* diagnostics) and names no member.

verl's `fit()` is kept whole; the subclass overrides five small methods. Why these:
- `fit()` unions the dataset batch (B*n rows) with the generation output and slices the
  output to B*n rows (`DataProto.union` asserts equal sizes), so the row count cannot change
  before that. Generation goes through `self.async_rollout_manager`, which `init_workers`
  wraps in `TurnRolloutManager`: right after `generate_sequences` returns it fans the output
  out into a TurnBatch (fan_out.py), runs the PO's filtering with resampling tries
  (arena.po.compose.collect_step_groups; a try k > 0 replays the batch's prompts with seeds
  `step_seeds(seed, step, k)` in the row column `arena_seed`; this runs before fit() puts the
  rollout replicas to sleep) and hands the kept TurnBatch on in `meta_info`.
- `_balance_batch(batch, metrics)` is the first method fit() calls on the unioned batch,
  before global_token_num, reward extraction and `compute_log_prob`; it swaps the per-turn
  rows into `batch` in place (fan_out.swap_in: the embedded backend's mini-batches, each
  followed by its pad rows, mini_batches.mini_batch_layout), adds the rollout/filter metrics,
  then runs verl's balancing inside each mini-batch (rows spread over the data-parallel ranks by
  length; no row leaves its mini-batch). So `trainer.balance_batch` must stay true.
- Mini-batches as the embedded backend cuts them (arena/backends/embedded/update.py): verl's
  `_update_actor` would cut the rows into mini-batches of the configured ppo_mini_batch_size *
  rollout.n rows, a size fixed before the per-turn fan-out (about T times as many optimizer
  steps as the embedded backend with T turns per episode), at fixed row counts, and divide every
  seq-mean loss by that padded size. `_update_actor` therefore calls verl's once per mini-batch
  and epoch (epoch-major, as the embedded loop), with that mini-batch's rows and its real-row
  count as `global_batch_size` (mini_batches.OneMiniBatchUpdate): the same rows, the same
  denominators and the same optimizer steps as the embedded backend.
- `_compute_old_log_prob` keeps the old-policy entropy in the batch (fit drops it; EMPG reads it).
- fit() calls the module function `compute_advantage`, which hands a registered estimator
  no `non_tensor_batch`; so `__init__` records the arena estimator (`algorithm.adv_estimator`,
  e.g. arena_gigpo) and points verl's slot to `arena_deferred` (zeros), and `_update_actor`
  computes the real advantages with `compute_arena_advantage` on the non-pad rows first.
- The run folder: fit() logs through verl's `Tracking` only (`logger.log(metrics, step)` at the
  end of each step, and once for the validation before the first step). `fit` swaps in
  `RowTracking` (a Tracking whose log() also calls `_log_row`) while verl's fit runs:
  `_log_row` appends the row of that step to metrics.jsonl unless the step has one (on resume
  the kept rows hold the checkpoint's step k, whose validation verl logs again). A checkpoint
  verl asks for (`_save_checkpoint`, before the step's log) is saved right after the step's
  row is written, so checkpoint k never exists without row k: a run killed in between resumes
  from checkpoint k - 1, drops nothing it needs and writes step k once, complete.
  `_load_checkpoint` starts the `VerlRunWriter` (rows up to the checkpoint step kept, the rest
  dropped), and `fit` writes summary.json after verl's fit returned.
- The policy as HF model folders: each checkpoint is exported to `<run>/steps/<k>/` right after
  verl saved it, and the last one to `<run>/policy/` before summary.json (policy_export.py).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from omegaconf import open_dict
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils.metric import reduce_metrics

from arena.envs.base import step_seeds
from arena.po.compose import ResolvedPO, advantage_diagnostics, collect_step_groups
from arena.po.types import TurnBatch

from . import agent_loop  # noqa: F401  (registers "arena_agent" in this process)
from .advantages import ESTIMATORS, compute_arena_advantage, estimator_name
from .fan_out import PAD_KEY, swap_in, turns_from_output
from .mini_batches import (MINI_KEY, OneMiniBatchUpdate, merge_update_outputs, mini_batch_layout, rows_by_mini_batch,
                           rows_with_tokens)
from .policy_export import export_final, export_step
from .policy_loss import resolved_po
from .registry import register_once

TURNS_KEY, METRICS_KEY, DEFERRED = "arena_turn_batch", "arena_rollout_metrics", "arena_deferred"
# a folder: each training step's kept TurnBatch is saved there as turns_step_<k>.pt (tests, debugging)
DUMP_TURNS_ENV = "ARENA_VERL_DUMP_TURNS"


def deferred_estimator(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, **_: Any):
    """verl's compute_advantage slot: zeros [N, T]; `_update_actor` writes the real values."""
    zeros = torch.zeros_like(response_mask, dtype=torch.float32)  # [N, T]
    return zeros, zeros.clone()


register_once(core_algos.ADV_ESTIMATOR_REGISTRY, DEFERRED, deferred_estimator, core_algos.register_adv_est,
              "advantage estimator")


def apply_arena_advantage(data: DataProto, adv_estimator: str, **hp: Any) -> DataProto:
    """advantages/returns [N, T] from the arena estimator over the non-pad rows; pad rows get 0."""
    is_pad = np.asarray(data.non_tensor_batch.get(PAD_KEY, np.zeros(len(data), dtype=bool)), dtype=bool)  # [N]
    if not is_pad.any():
        return compute_arena_advantage(data, adv_estimator, **hp)
    real = np.flatnonzero(~is_pad)  # [N_real]
    sub = compute_arena_advantage(data.select_idxs(real), adv_estimator, **hp)
    advantages = torch.zeros_like(data.batch["response_mask"], dtype=torch.float32)  # [N, T]
    advantages[torch.as_tensor(real)] = sub.batch["advantages"]  # [N_real, T] into [N, T]
    data.batch["advantages"], data.batch["returns"] = advantages, advantages.clone()
    return data


def turn_metrics(turns: TurnBatch, fstats: dict) -> dict[str, float]:
    """Our §F rollout/filter keys for one step (means over turn rows unless said)."""
    n = max(len(turns), 1)
    return {
        "train/success_rate": fstats["all_success_rate"],  # over ALL sampled trajectories
        "filter/kept_group_frac": fstats["kept_group_frac"],
        "filter/tries": float(fstats["tries"]),
        "rollout/format_valid_ratio": float(turns.format_valid.float().sum()) / n,
        "rollout/action_valid_ratio": float(turns.action_valid.float().sum()) / n,
        "rollout/response_length": float(turns.response_mask.sum()) / n if len(turns) else 0.0,
        # population SD of the rows' reply lengths (the embedded trainer's definition)
        "rollout/response_length_std": float(turns.response_mask.sum(-1).float().std(correction=0)) if len(turns) else 0.0,
        "rollout/turn_samples": float(len(turns)),
    }


def reseeded(gen_batch: DataProto, group_seeds: list, group_size: int) -> DataProto:
    """A copy of the (repeated) generation batch whose row r plays seed group_seeds[r // n]."""
    out = gen_batch.slice(0, len(gen_batch))
    out.non_tensor_batch = dict(out.non_tensor_batch)
    out.non_tensor_batch["arena_seed"] = np.repeat(np.asarray(group_seeds, dtype=np.int64), group_size)  # [B*n]
    out.meta_info = dict(gen_batch.meta_info)
    return out


class TurnRolloutManager:
    """verl's AgentLoopManager with the fan-out and the PO's filtering after generation."""

    def __init__(self, inner, *, group_size: int, pad_id: int, po: ResolvedPO, seed: int = 0,
                 dump_dir: Optional[str] = None):
        """`po`: the run's resolved PO; its filtering member runs through the composer."""
        self.inner, self.group_size, self.pad_id = inner, int(group_size), int(pad_id)
        self.po, self.seed = po, int(seed)
        self.dump_dir = Path(dump_dir) if dump_dir else None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def generate_sequences(self, gen_batch: DataProto) -> DataProto:
        if gen_batch.meta_info.get("validate", False):
            return self.inner.generate_sequences(gen_batch)
        step = int(gen_batch.meta_info.get("global_steps", 0))
        n_groups = len(gen_batch) // self.group_size
        outputs: list[DataProto] = []

        def one_try(try_idx: int) -> TurnBatch:
            batch = gen_batch if try_idx == 0 else reseeded(
                gen_batch, step_seeds(self.seed, step, try_idx, n_groups), self.group_size)
            out = self.inner.generate_sequences(batch)
            # verl's AgentLoopManager returns only what the loops produced; the rows keep the
            # input's order, so the group ids (uid) come from the input batch
            if "uid" not in out.non_tensor_batch and "uid" in batch.non_tensor_batch:
                out.non_tensor_batch["uid"] = batch.non_tensor_batch["uid"]
            outputs.append(out)
            return turns_from_output(outputs[-1], group_size=self.group_size, pad_id=self.pad_id)

        t0 = time.perf_counter()
        turns, fstats = collect_step_groups(self.po, one_try, needed_groups=n_groups, step=step)
        first = outputs[0]  # B*n rows, as fit() expects; its rows are replaced in _balance_batch
        first.meta_info[TURNS_KEY] = turns
        first.meta_info[METRICS_KEY] = {**turn_metrics(turns, fstats), "perf/rollout_seconds": time.perf_counter() - t0}
        if self.dump_dir is not None:
            self.dump_dir.mkdir(parents=True, exist_ok=True)
            torch.save({"step": step, "turns": turns}, self.dump_dir / f"turns_step_{step}.pt")
        return first


class ArenaRayPPOTrainer(RayPPOTrainer):
    def __init__(self, *args, run_writer=None, config_yaml: str = "", seed: int = 0,
                 num_mini_batches: int = 1, mini_batch_turns: Optional[int] = None, **kwargs):
        """The run's resolved PO comes from verl's config, the section the loss reads
        (`actor_rollout_ref.actor.policy_loss`, policy_loss.resolved_po): one channel. The
        filtering and advantage members and their hyperparameters are the composer's answers
        for it."""
        super().__init__(*args, **kwargs)
        self.num_mini_batches, self.mini_batch_turns = int(num_mini_batches), mini_batch_turns
        po = resolved_po(self.config)
        name = str(self.config.algorithm.adv_estimator)
        if name not in ESTIMATORS:
            raise ValueError(f"ArenaRayPPOTrainer needs algorithm.adv_estimator in {sorted(ESTIMATORS)}, got {name!r}")
        if name != estimator_name(po.advantage):
            raise ValueError(f"algorithm.adv_estimator={name!r} is not the run's advantage {po.advantage!r}; "
                             f"valid: {estimator_name(po.advantage)!r}")
        if not self.config.trainer.balance_batch:
            raise ValueError("ArenaRayPPOTrainer needs trainer.balance_batch=true (the per-turn rows are swapped in "
                             "in _balance_batch); valid: true")
        self.po = po
        self.arena_advantage, self.advantage_hp = name, po.member_hp("advantage")
        with open_dict(self.config.algorithm):
            self.config.algorithm.adv_estimator = DEFERRED
        self.seed = int(seed)
        self.run_writer, self.config_yaml = run_writer, config_yaml
        self._save_due = False  # verl asked for a checkpoint that waits for the step's row

    def row_unit(self) -> int:
        """micro-batch rows x data-parallel ranks: what every mini-batch must hold a multiple of."""
        rollout_ref, trainer = self.config.actor_rollout_ref, self.config.trainer
        ranks = int(trainer.n_gpus_per_node) * int(trainer.nnodes)
        return int(rollout_ref.actor.ppo_micro_batch_size_per_gpu) * ranks

    def init_workers(self):
        super().init_workers()
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.async_rollout_manager = TurnRolloutManager(
            self.async_rollout_manager, group_size=self.config.actor_rollout_ref.rollout.n, pad_id=pad_id,
            po=self.po, seed=self.seed,
            dump_dir=os.environ.get(DUMP_TURNS_ENV) or None)

    def _balance_batch(self, batch: DataProto, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        turns = batch.meta_info.pop(TURNS_KEY, None)
        if turns is None:
            return super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        layout = mini_batch_layout(len(turns), num_mini_batches=self.num_mini_batches,
                                   mini_batch_turns=self.mini_batch_turns, unit=self.row_unit())
        swap_in(batch, turns, layout=layout)
        metrics.update(batch.meta_info.pop(METRICS_KEY, {}))
        metrics.update(advantage_diagnostics(self.po, turns))  # GiGPO's step groups, logged for every method
        metrics["rollout/pad_rows"] = float(batch.non_tensor_batch[PAD_KEY].sum())
        epochs = int(self.config.actor_rollout_ref.actor.ppo_epochs)
        metrics["actor/updates_per_step"] = float(len(layout) * epochs)
        self._balance_each_mini_batch(batch, metrics, logging_prefix)

    def _balance_each_mini_batch(self, batch: DataProto, metrics: dict, logging_prefix: str) -> None:
        """verl's balancing run on each mini-batch's rows alone; the mini-batches stay in order.
        Its `<prefix>/*` metrics are reduced over the mini-batches by verl's rule (max for keys
        with "max", min for "min", else mean)."""
        parts, stats = [], {}
        for rows in rows_by_mini_batch(batch):
            part = batch.select_idxs(rows)
            part_metrics: dict = {}
            super()._balance_batch(part, part_metrics, logging_prefix=logging_prefix)
            for key, value in part_metrics.items():
                stats.setdefault(key, []).append(value)
            parts.append(part)
        batch.batch = torch.cat([part.batch for part in parts])  # [N'] rows, mini-batch by mini-batch
        batch.non_tensor_batch = {key: np.concatenate([part.non_tensor_batch[key] for part in parts])
                                  for key in batch.non_tensor_batch}
        metrics.update(reduce_metrics(stats))

    def _compute_old_log_prob(self, batch: DataProto):
        old_log_prob, mfu = super()._compute_old_log_prob(batch)
        batch.batch["entropys"] = old_log_prob.batch["entropys"]  # [N, T] fit pops it from old_log_prob
        return old_log_prob, mfu

    def _update_actor(self, batch: DataProto) -> DataProto:
        apply_arena_advantage(batch, self.arena_advantage, **self.advantage_hp)
        if MINI_KEY not in batch.non_tensor_batch:
            return super()._update_actor(batch)
        # verl's update once per mini-batch and epoch, epoch-major (module docstring)
        groups = rows_by_mini_batch(batch)
        worker_group, outputs = self.actor_rollout_wg, []
        try:
            for _ in range(int(self.config.actor_rollout_ref.actor.ppo_epochs)):
                for rows in groups:
                    part = batch.select_idxs(rows)
                    self.actor_rollout_wg = OneMiniBatchUpdate(
                        worker_group, rows=len(part), seqs=rows_with_tokens(part.batch["response_mask"]))
                    outputs.append(super()._update_actor(part))
        finally:
            self.actor_rollout_wg = worker_group
        return merge_update_outputs(outputs)

    # ------------------------------------------------------------------ run folder
    def _load_checkpoint(self):
        out = super()._load_checkpoint()
        if self.run_writer is not None:
            self.run_writer.start(self.config_yaml, resume_step=self.global_steps or None)
        return out

    def _save_checkpoint(self):
        """Deferred to `_log_row`, right after this step's row (module docstring)."""
        self._save_due = True

    def _log_row(self, data: dict, step: int) -> None:
        """verl logged `data` for `step`: write its row (once), then the checkpoint it asked for."""
        if self.run_writer is not None and data and not any(
                row["step"] == step for row in self.run_writer.folder.iter_metrics()):
            self.run_writer.log(data, step=step)
        if self._save_due:
            self._save_due = False
            super()._save_checkpoint()
            self._export_step_policy()

    def _export_step_policy(self) -> None:
        """<run>/steps/<k>/ from the checkpoint just saved (policy_export.py)."""
        if self.run_writer is not None:
            export_step(self.config.trainer.default_local_dir, self.run_writer.folder, self.global_steps)

    def fit(self):
        import verl.utils.tracking as tracking

        trainer, verl_tracking = self, tracking.Tracking

        class RowTracking(verl_tracking):
            def log(self, data, step, backend=None):
                super().log(data, step, backend=backend)
                trainer._log_row(data, int(step))

        self._save_due = False
        tracking.Tracking = RowTracking  # fit() imports the name from the module when it starts
        try:
            out = super().fit()
        finally:
            tracking.Tracking = verl_tracking
        if self._save_due:  # verl asked for a checkpoint after its last log (not in verl 0.9.1's fit)
            self._log_row({}, self.global_steps)
        if self.run_writer is not None:
            # <run>/policy/ before the summary: a finished run always has its final policy
            export_final(self.config.trainer.default_local_dir, self.run_writer.folder)
            self.run_writer.finish()  # summary.json last, only after a finished fit
        return out
