"""How a `device=cuda` run spreads over its GPUs and nodes: right by construction for any count
(docs/verl.md, GPUs and nodes).

verl's own defaults fit 8 GPUs: vLLM tensor parallelism 2, 8 agent-loop workers, flash-attn
with padding removed. They break elsewhere, after Ray has started and the models have loaded:
  - TP 2 on 1 GPU (or any count that 2 does not divide): "rollout world_size: 1 is not
    divisible by infer_world_size: 2" (verl's validate_config passes that config);
  - verl splits each step's prompts evenly over the agent-loop workers (DataProto.chunk asserts
    `len % workers == 0`; only the eval batch is padded);
  - flash-attn not installed: the actor and reference loads raise ImportError.
`gpu_overrides` picks, for G GPUs per node and N nodes (world W = G * N):
    TP      = the largest divisor of G that is <= verl's default 2  (a replica stays in a node)
    workers = the largest divisor of batch_envs * group_size that is <= verl's default 8
    attention: flash_attention_2 with remove-padding when `flash_attn` imports, else sdpa
               with use_remove_padding=false (verl's padded path, no flash-attn kernel)
The user's `verl.*` keys come after these; `check_layout` then refuses (exit 2, the valid values
named) a TP or a worker count that does not divide.

Ray's CPU budget: verl's resource pool asks each GPU's bundle for 3 CPUs (ResourcePoolManager.
max_colocate_count = 3: actor/ref, rollout, reward model), and every other actor (TaskRunner,
agent-loop workers, rollout servers, request router) for 1; a budget below that waits for ever
with no message. `ray_cpus(verl_cfg)` is that sum; a run's private head and every node of the
multi-node script declare at least that many logical CPUs (a scheduling budget, not cores;
its upper bound, so that it is known before verl's config is built: the head starts first).
"""
from __future__ import annotations

import importlib.util
from typing import Any

VERL_DEFAULT_TP = 2  # actor_rollout_ref.rollout.tensor_model_parallel_size in verl 0.9.1's ppo_trainer.yaml
VERL_DEFAULT_AGENT_WORKERS = 8  # actor_rollout_ref.rollout.agent.num_workers in the same yaml
CPUS_PER_GPU_BUNDLE = 3  # verl.single_controller.ray.base.ResourcePoolManager.max_colocate_count
OTHER_ACTORS = 2  # the TaskRunner and verl's request router (one CPU each)
TP_KEY = "actor_rollout_ref.rollout.tensor_model_parallel_size"
WORKERS_KEY = "actor_rollout_ref.rollout.agent.num_workers"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in divisors(n) if d <= max(1, cap))


def has_flash_attn() -> bool:
    """flash-attn importable here (checked without importing it)."""
    return importlib.util.find_spec("flash_attn") is not None


def gpu_overrides(cfg, gpus_per_node: int, rollout: str) -> dict[str, Any]:
    """verl keys of a device=cuda run on `gpus_per_node` GPUs a node (module docstring)."""
    if gpus_per_node < 1:
        raise ValueError("device=cuda needs the GPU count: no CUDA GPU is visible here; valid: run on a GPU node, "
                         "or set ARENA_VERL_GPUS_PER_NODE=N to build the config for N GPUs a node (--dry-run)")
    tp = 1 if rollout == "arena" else largest_divisor_at_most(gpus_per_node, VERL_DEFAULT_TP)
    prompts = int(cfg.batch_envs) * int(cfg.group_size)
    out: dict[str, Any] = {TP_KEY: tp, WORKERS_KEY: largest_divisor_at_most(prompts, VERL_DEFAULT_AGENT_WORKERS)}
    if not has_flash_attn():
        out["actor_rollout_ref.model.override_config"] = {"attn_implementation": "sdpa"}
        out["actor_rollout_ref.model.use_remove_padding"] = False
    return out


def check_layout(verl_cfg) -> None:
    """ValueError naming the valid values when the rollout's TP does not divide the GPUs of a
    node, or the agent-loop workers do not divide a step's prompts (module docstring)."""
    gpus = int(verl_cfg.trainer.n_gpus_per_node)
    rollout = verl_cfg.actor_rollout_ref.rollout
    tp = int(rollout.tensor_model_parallel_size)
    if gpus % tp:
        raise ValueError(f"verl.{TP_KEY}={tp} does not divide the {gpus} GPU(s) of a node (verl's workers would "
                         f"crash at init); valid: {', '.join(map(str, divisors(gpus)))}")
    prompts = int(verl_cfg.data.train_batch_size) * int(rollout.n)
    workers = int(rollout.agent.num_workers)
    if prompts % workers:
        raise ValueError(f"verl.{WORKERS_KEY}={workers} does not divide a step's {prompts} episodes "
                         f"(batch_envs x group_size; verl splits them evenly); valid: "
                         f"{', '.join(str(d) for d in divisors(prompts) if d <= 64)}")


def ray_cpus(gpus_per_node: int, agent_workers: int = VERL_DEFAULT_AGENT_WORKERS) -> int:
    """Logical CPUs verl's actors may ask Ray for on one node, at most (module docstring): 3 per
    GPU + the agent-loop workers + a rollout server per GPU (TP 1: the most servers) + the
    TaskRunner and the router."""
    return CPUS_PER_GPU_BUNDLE * gpus_per_node + agent_workers + gpus_per_node + OTHER_ACTORS


def run_agent_workers(cfg) -> int:
    """The agent-loop workers a run asks for: its `verl.` key when set, else verl's default (an
    upper bound of what gpu_overrides picks), read without building verl's config."""
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, "verl." + WORKERS_KEY, default=None)
    return int(value) if value is not None else VERL_DEFAULT_AGENT_WORKERS
