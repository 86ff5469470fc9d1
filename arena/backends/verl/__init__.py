"""verl backend: arena's methods through verl 0.9.1's own extension points.

verl is imported lazily: `import arena` and `import arena.backends.verl` never import it; the
submodules below do.

Modules
- `policy_loss`   "arena" in verl's policy-loss registry (PG term only, aggregated with
                  `config.global_batch_info` mapped onto AggNorm); settings in
                  `ArenaPolicyLossConfig(PolicyLossConfig)`, chosen by
                  `actor.policy_loss._target_`, whose `po` is the run's whole resolved PO:
                  the backend's one channel for it (the trainer reads it there too,
                  `resolved_po`). Registers on import; a collision raises.
- `advantages`    `arena_grpo`, `arena_gigpo`, `arena_empg` in verl's estimator registry, and
                  `compute_arena_advantage(data, name, **hp)`, the trainer-subclass step that
                  passes them `non_tensor_batch`/`batch` (missing fields are named).
- `agg_modes`     `VERL_AGG_MODE`: our aggregation members by verl's `loss_agg_mode` name.
- `registry`      `register_once`: registration into verl's registries that refuses collisions.
- `dataproto`     TurnBatch <-> DataProto, one row per turn-sample, lossless.
- `agent_loop`    `ArenaAgentLoop` ("arena_agent"): one episode per verl prompt, one LLM call
                  per turn through verl's server handle; the turns in `extra_fields`.
- `fan_out`       verl's per-prompt generation output -> one actor row per turn (+ pad rows).
- `mini_batches`  the embedded backend's mini-batches on verl: the row layout (each slice
                  padded to whole micro-batches), one verl update per mini-batch whose
                  seq-mean denominator counts real rows only, the merged metrics.
- `trainer`       `ArenaRayPPOTrainer(RayPPOTrainer)` and `TurnRolloutManager` (fan-out,
                  the PO's filtering with resampling, deferred advantages, the embedded
                  backend's mini-batches, run-folder rows written before their checkpoint).
- `task_runner`   verl's TaskRunner with `ArenaRayPPOTrainer` (a Ray actor: verl's driver).
- `dataset`       the run's verl dataset files: train/val parquet (one row per episode seed,
                  the embedded backend's seeds) and the "arena_agent" agent-loop yaml.
- `run_folder`    verl metrics dict -> our §F metric keys in metrics.jsonl; summary.json last;
                  `arena_trainer_kwargs` (run writer, seed, mini-batch split from config.yaml;
                  not the PO).
- `verl_config`   arena run config -> verl's composed `ppo_trainer.yaml`, validated by verl's
                  dataclasses; `cli.verl_config_main` is `arena verl-config`.
- `main`          `run_training` for `arena train backend=verl` (exit 0/1/2 as the embedded
                  backend), and `python -m arena.backends.verl.main CONFIG.yaml`.
- `launch`        what is missing on this machine (exit 2), and the multi-node sbatch script
                  rendered from `templates/ray_on_slurm.sbatch` (verl's Ray-on-SLURM pattern).
- `arena_rollout` "arena" in verl's rollout registries (`rollout.name=arena`): `ArenaReplica`
                  (server side) and `ArenaServerAdapter` (worker side, weight sync).
- `rollout_server` `ArenaRolloutServer`: arena's KV-cache sampler behind verl's server API.
- `cpu_platform`  verl on the CPU (`device=cpu`): the platform plugin and its config keys.
- `ray_head`      a private Ray head per single-node job: free ports, its own temp dir.

How it fits together (registration in every Ray process, the arena rollout and its weight
sync, the stop rule, CPU runs, the per-turn fan-out, mini-batches, the run folder, the
agreement with the embedded backend, and what has and has not run): docs/verl.md.
"""
from __future__ import annotations


def register() -> None:
    """Register arena's policy loss, advantage estimators and "arena" rollout in verl's
    registries (idempotent).

    Importing the modules registers them; this function exists so that a driver or a Ray
    worker can call it explicitly. It imports verl and ray."""
    # lazy: registering imports verl, Ray and torch; the package itself imports none of them
    from . import advantages, arena_rollout, policy_loss  # noqa: F401  (registration on import)
