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
- `dataproto`     TurnBatch <-> DataProto, one row per turn-sample, lossless.
- `run_folder`    verl metrics dict -> our §F metric keys in metrics.jsonl; summary.json last.
- `verl_config`   arena run config -> verl's composed `ppo_trainer.yaml`, validated by verl's
                  dataclasses; `cli.verl_config_main` is `arena verl-config`.

Registration in Ray workers: the generated config sets
`actor.policy_loss._target_ = arena.backends.verl.policy_loss.ArenaPolicyLossConfig`. Every
worker instantiates its actor config from that `_target_` (hydra `instantiate` via
`omega_conf_to_dataclass`), which imports `arena.backends.verl.policy_loss` and so registers
"arena" in that process before `ppo_loss` looks it up. The driver registers the estimators by
importing `advantages` (advantages are computed in the driver).

Where the per-turn fan-out happens, and why (NOT BUILT YET; design): verl's `AgentLoopOutput`
holds one sample per prompt (`prompt_ids`, `response_ids`, `response_mask`, one reward), while
our episodes make one LLM call per turn, each of which must become its own actor row with the
§F fields. The agent loop (an `AgentLoopBase` subclass registered as "arena_agent") runs one
episode per prompt with our environment and agent protocol, generating through verl's server
handle (`self.server_manager.generate`), and returns the per-turn records in
`AgentLoopOutput.extra_fields["arena_turns"]`. The fan-out into rows happens in the trainer
subclass, right after `generate_sequences` returns the batch and before `compute_log_prob`:
there the batch is still in the driver, the row count may change freely (verl's DataProto is
re-padded and re-balanced after this point), and dynamic filtering can drop whole groups and
resample before any log-prob is computed. It builds a TurnBatch from the records and converts
it with `dataproto.to_dataproto`.

What was NOT done or could not run on this CPU machine (verl 0.9.1, torch CPU, no vllm)
- FSDP engine `train_batch` in a one-process gloo group: not attempted for lack of time. The
  test instead calls `verl.workers.utils.losses.ppo_loss` directly on a hand-built TensorDict
  in verl's no-padding layout (`tests/verl/test_ppo_loss.py`), with our registered loss, KL
  and entropy, and checks value and gradient against arena's `objective`.
- The agent loop with a fake LLM server and the trainer subclass (fan-out, dynamic filtering
  at turn level, `compute_arena_advantage` call, `VerlRunWriter` hook): not written.
- A full verl training step on CPU: not attempted. verl's rollout needs a vLLM or SGLang
  server (`actor_rollout_ref.rollout.name` is mandatory; neither is installed here).
- SLURM / Ray launch templates and the `pip install 'arena[gpu]'` extra: not done.
- `po.agg_norm=per_microbatch` is rejected on verl (ValueError, valid: global): verl
  aggregates KL and entropy over the global counts, so a per-micro-batch PG term would mix
  two normalisations.
- `rollout_is_weights` (verl's rollout correction) is rejected by the "arena" loss.
"""
from __future__ import annotations


def register() -> None:
    """Register arena's policy loss and advantage estimators in verl's registries (idempotent).

    Importing the two modules registers them; this function exists so that a driver or a Ray
    worker can call it explicitly. It imports verl."""
    from . import advantages, policy_loss  # noqa: F401  (registration on import)
