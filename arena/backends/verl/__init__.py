"""verl backend (issue #7): arena's methods through verl 0.9.1's own extension points.

verl is imported lazily: `import arena` and `import arena.backends.verl` never import it; the
submodules below do.

Modules
- `policy_loss`   "arena" in verl's policy-loss registry (PG term only, aggregated with
                  `config.global_batch_info` mapped onto AggNorm); settings in
                  `ArenaPolicyLossConfig(PolicyLossConfig)`, chosen by
                  `actor.policy_loss._target_`. Registers on import; a collision raises.
- `advantages`    `arena_grpo`, `arena_gigpo`, `arena_empg` in verl's estimator registry, and
                  `compute_arena_advantage(data, name, **hp)`, the trainer-subclass step that
                  passes them `non_tensor_batch`/`batch` (missing fields are named).
- `registry`      `register_once`: registration into verl's registries that refuses collisions.
- `dataproto`     TurnBatch <-> DataProto, one row per turn-sample, lossless.
- `agent_loop`    `ArenaAgentLoop` ("arena_agent"): one episode per verl prompt, one LLM call
                  per turn through verl's server handle; the turns in `extra_fields`.
- `fan_out`       verl's per-prompt generation output -> one actor row per turn (+ pad rows).
- `trainer`       `ArenaRayPPOTrainer(RayPPOTrainer)` and `TurnRolloutManager` (fan-out,
                  dynamic filtering with resampling, deferred advantages, run-folder hooks).
- `task_runner`   verl's TaskRunner with `ArenaRayPPOTrainer` (a Ray actor: verl's driver).
- `dataset`       the run's verl dataset files: train/val parquet (one row per episode seed,
                  the embedded backend's seeds) and the "arena_agent" agent-loop yaml.
- `run_folder`    verl metrics dict -> our §F metric keys in metrics.jsonl; summary.json last.
- `verl_config`   arena run config -> verl's composed `ppo_trainer.yaml`, validated by verl's
                  dataclasses; `cli.verl_config_main` is `arena verl-config`.
- `main`          `run_training` for `arena train backend=verl` (exit 0/1/2 as the embedded
                  backend), and `python -m arena.backends.verl.main CONFIG.yaml`.
- `launch`        what is missing on this machine (exit 2), and the multi-node sbatch script
                  rendered from `templates/ray_on_slurm.sbatch` (verl's Ray-on-SLURM pattern).
- `ray_head`      a private Ray head per single-node job: free ports, its own temp dir.

Registration in Ray workers: the generated config sets
`actor.policy_loss._target_ = arena.backends.verl.policy_loss.ArenaPolicyLossConfig`. Every
worker instantiates its actor config from that `_target_` (hydra `instantiate` via
`omega_conf_to_dataclass`), which imports `arena.backends.verl.policy_loss` and so registers
"arena" in that process before `ppo_loss` looks it up. The driver registers the estimators by
importing `advantages` (advantages are computed in the driver).

Where the per-turn fan-out happens, and why: verl's `AgentLoopOutput` holds one sample per
prompt (`prompt_ids`, `response_ids`, `response_mask`, one reward), while our episodes make one
LLM call per turn, each of which must become its own actor row with the §F fields.
`agent_loop.ArenaAgentLoop` ("arena_agent" in verl's agent-loop registry) runs one episode per
prompt with our environment and agent protocol (arena/agent: render_prompt, _play_turn),
generating each turn through `self.server_manager.generate`, and returns the per-turn records
in `AgentLoopOutput.extra_fields["arena_turns"]` (trajectory values in `["arena_episode"]`).
The fan-out happens in the driver, in `trainer.ArenaRayPPOTrainer`, right after generation and
before any log-prob: verl's `fit()` unions the dataset batch with the generation output and
slices it to B*n rows (`DataProto.union` asserts equal sizes), so the wrapped rollout manager
(`trainer.TurnRolloutManager`) builds the TurnBatch right after `generate_sequences` returns
(`fan_out.turns_from_output`, reusing arena.agent.rollout._build_batch), runs dynamic filtering
with resampling tries there (before fit() puts the replicas to sleep), and `_balance_batch` (the
first method fit() calls on the unioned batch, before reward extraction and `compute_log_prob`)
swaps the per-turn rows into the batch in place (`fan_out.swap_in` -> `dataproto.to_dataproto`,
padded to a multiple of ppo_mini_batch_size * rollout.n rows with zero-mask rows).
Advantages: fit() calls the module function `compute_advantage`, which passes a registered
estimator no `non_tensor_batch`, so the trainer points verl's slot to `arena_deferred` (zeros)
and `_update_actor` runs `compute_arena_advantage` first (module docstring of trainer.py).

What could NOT run on this CPU machine (verl 0.9.1, torch CPU, no vllm), and what ran instead
(a) A full verl training step. verl 0.9.1 has no HF rollout; the replica registry holds only
    vllm/sglang/trtllm. `rollout.name=hf` raises
    `ValueError: Unknown rollout mode: hf. Available: ['vllm', 'sglang', 'trtllm']`
    (verl/workers/rollout/replica.py:326, reached from verl/workers/rollout/llm_server.py:393),
    and `rollout.name=vllm` without vllm raises `ValueError: vllm version None not supported
    and SGLang also not Found. Currently supported vllm versions are 0.18.0+`
    (verl/third_party/vllm/__init__.py:37).
(b) The FSDP engine's `train_batch` DOES run on CPU, in a one-process gloo group, with our
    registered loss, a tiny local Qwen3 and a hand-made per-turn batch
    (tests/verl/test_engine_train_batch.py; workarounds in tests/verl/engine_helpers.py):
    - a CPU platform plugin through verl's `platform_manager.set_platform`: verl's device
      detection falls back to 'nvidia', and `init_device_mesh("cuda", ...)` then fails with
      `AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'`
      (via verl/workers/engine/fsdp/utils.py:48);
    - `FSDPEngineWithLMHead` built directly: `EngineRegistry` lists it only for devices
      cuda/npu (verl/workers/engine/fsdp/transformer_impl.py:1143);
    - strategy fsdp2: FSDP1 wraps with `sync_module_states=True`, which needs the parameters
      on a GPU (transformer_impl.py:437-444);
    - attention "eager" (`HFModelConfig` defaults to flash_attention_2);
    - verl's `TrainingWorker` (verl/workers/engine_workers.py) is not used: the test calls
      `engine.train_batch` with the non-tensor defaults TrainingWorker fills (engine_helpers.py
      gives uvicorn as the reason; it is installed in the current .venv). Not covered: the LR
      scheduler step, the cross-rank metric gather and the MFU metrics of TrainingWorker.
    `ppo_loss` called directly on a hand-built TensorDict is checked against arena's
    `objective` in value and gradient (tests/verl/test_ppo_loss.py).
(c) `init_workers` and `_compute_old_log_prob` (they call Ray worker groups) have no test
    without vLLM. `_balance_batch` and `_update_actor` are tested with verl's base methods
    replaced by recorders (test_agent_loop.py: the per-prompt rows become one row per turn,
    padded, and the actor update receives arena's advantages on them); its run-folder hooks
    (`_load_checkpoint`, `_validate`, `_begin_step`, `fit`) are driven in verl's fit order in
    tests/verl/test_verl_main.py, and `TurnRolloutManager` (fan-out, dynamic filtering with
    resampling) with a fake inner manager in tests/verl/test_agent_loop.py, which also drives
    ArenaAgentLoop through verl's own AgentLoopWorker with a fake LLM server.
(d) verl 0.9.1 defaults `trainer.use_v1=true`, whose TaskRunnerV1 imports `transfer_queue`
    (not installed, not part of verl's pins); `main.runtime_overrides` sets it false
    (ArenaRayPPOTrainer extends the v0 `RayPPOTrainer`).

Also
- `po.agg_norm=per_microbatch` is rejected on verl (ValueError, valid: global): verl
  aggregates KL and entropy over the global counts, so a per-micro-batch PG term would mix
  two normalisations.
- `rollout_is_weights` (verl's rollout correction) is rejected by the "arena" loss.
"""
from __future__ import annotations


def register() -> None:
    """Register arena's policy loss, advantage estimators and "arena" rollout in verl's
    registries (idempotent).

    Importing the modules registers them; this function exists so that a driver or a Ray
    worker can call it explicitly. It imports verl and ray."""
    from . import advantages, arena_rollout, policy_loss  # noqa: F401  (registration on import)
