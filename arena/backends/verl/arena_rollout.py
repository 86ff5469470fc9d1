"""verl's "arena" rollout (`rollout.name=arena`), registered through verl 0.9.1's extension points.

verl looks a rollout up by `actor_rollout_ref.rollout.name` in two registries, and importing
this module registers "arena" in both (`register_arena_rollout`):
- the server side, `RolloutReplicaRegistry.register("arena", loader)`
  (verl/workers/rollout/replica.py), read in verl's driver by `LLMServerManager`: one
  `ArenaReplica` per rollout replica, whose `launch_servers` starts one
  `rollout_server.ArenaRolloutServer` Ray actor (named `arena_server_<replica>_<node>`, as
  verl names vLLM's `vllm_server_<replica>_<node>`) on the node of the replica's first worker;
- the worker side, `_ROLLOUT_REGISTRY[("arena", "async")]` (verl/workers/rollout/base.py), read
  in every hybrid actor/rollout worker by `get_rollout_class`: `ArenaServerAdapter`.

Every process of a run imports this module: the run sets
$VERL_USE_EXTERNAL_MODULES to include it (main.verl_env), and `import verl` imports those
modules first (verl/__init__.py), so the Ray workers register "arena" before they build their
rollout.

Weight sync (verl's hybrid protocol, `checkpoint_engine.backend=naive`): after each update the
trainer calls the actor workers' `update_weights`, which hands `ArenaServerAdapter.update_weights`
the FSDP engine's `(HF name, full tensor)` generator; every rank consumes it (the full tensors
are gathered collectively), and the replica's rank 0 sends them, on the CPU, to its server,
which loads them before its next batch. So every step's rollout samples from the weights of the
last update. `resume` / `release` have nothing to page in or out: the server's weights stay
in its own memory (a second copy of the model: fine for the small models this rollout is for;
vLLM stays the fast path on GPUs).

Device: the server runs where the run does. On a device=cpu run (cpu_platform) it runs on the
CPU; on CUDA it gets the GPU of its replica's first worker (the same device as that worker:
`CUDA_VISIBLE_DEVICES` set from the worker's accelerator id, as verl does for vLLM's server).
"""
from __future__ import annotations

import os
from typing import Optional

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

from .rollout_server import ArenaRolloutServer

ROLLOUT_NAME = "arena"
ADAPTER_PATH = f"{__name__}.ArenaServerAdapter"


def server_name(replica_rank: int, node_rank: int = 0) -> str:
    """The Ray actor name of a replica's server (verl's `<name>_server_<replica>_<node>`)."""
    return f"{ROLLOUT_NAME}_server_{replica_rank}_{node_rank}"


def _replica_world_size(config) -> int:
    return config.tensor_model_parallel_size * config.data_parallel_size * config.pipeline_model_parallel_size


class ArenaServerAdapter(BaseRollout):
    """The worker-side rollout of a hybrid actor/rollout worker: forwards weights to the server."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        world = _replica_world_size(self.config)
        rank = int(os.environ.get("RANK", 0))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.is_leader_rank = self.rollout_rank == 0
        self.server_handle = None

    def _server(self):
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]):
        return None  # the server keeps its weights and has no persistent KV cache

    async def release(self):
        return None

    @torch.no_grad()
    async def update_weights(self, weights, global_steps: Optional[int] = None, wire_format: str = "named_tensors",
                             **kwargs):
        """Collect verl's (name, tensor) pairs on the CPU; rank 0 of the replica sends them."""
        if wire_format != "named_tensors":
            raise ValueError(f"arena rollout: wire_format={wire_format!r} is not supported; valid: named_tensors "
                             "(checkpoint_engine.backend=naive)")
        state: dict[str, torch.Tensor] = {}
        if hasattr(weights, "__aiter__"):
            async for name, tensor in weights:
                state[name] = tensor.detach().to("cpu", copy=True)
        else:
            for name, tensor in weights:
                state[name] = tensor.detach().to("cpu", copy=True)
        if self.is_leader_rank:
            await self._server().update_weights.remote(state, global_steps)


class ArenaReplica(RolloutReplica):
    """One rollout replica = one `ArenaRolloutServer` actor (verl's RolloutReplica interface)."""

    async def launch_servers(self):
        from verl.plugin.platform.platform_manager import get_platform

        if self.nnodes != 1:
            raise ValueError(f"arena rollout: one node per replica; got {self.nnodes} (tensor/pipeline parallel "
                             "size must fit on one node)")
        worker = self.workers[0]
        node_id, accelerators = await worker.__ray_call__.remote(
            lambda self: (ray.get_runtime_context().get_node_id(), ray.get_runtime_context().get_accelerator_ids()))
        platform = get_platform()
        on_cpu = platform.device_name == "cpu"  # cpu_platform: its "GPU" slots are not devices
        gpu_ids = [] if on_cpu else list((accelerators or {}).get(platform.ray_resource_name(), []))
        env_vars = {var: "1" for var in platform.ray_noset_envvars()}
        if gpu_ids:
            env_vars[platform.visible_devices_envvar()] = str(gpu_ids[0])
        device = "cuda" if gpu_ids else "cpu"
        server_cls = ray.remote(ArenaRolloutServer)
        server = server_cls.options(
            name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency,
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            runtime_env={"env_vars": {**_arena_env(), **env_vars}},
        ).remote(config=self.config, model_config=self.model_config, device=device)
        await server.ready.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)  # a key for verl's router (no HTTP server)


def _arena_env() -> dict[str, str]:
    """This process's verl plugin env vars, so the server registers the same modules."""
    return {k: os.environ[k] for k in ("VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES") if os.environ.get(k)}


def register_arena_rollout() -> None:
    """Register "arena" in verl's replica registry and worker rollout table (idempotent; a
    different owner of the name is an error)."""
    current = RolloutReplicaRegistry._registry.get(ROLLOUT_NAME)
    if current is not None and getattr(current, "__module__", None) != __name__:
        raise ValueError(f"rollout {ROLLOUT_NAME!r} is already registered in verl by {current!r}; "
                         f"registered: {sorted(RolloutReplicaRegistry._registry)}")
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    owner = rollout_base._ROLLOUT_REGISTRY.get((ROLLOUT_NAME, "async"))
    if owner is not None and owner != ADAPTER_PATH:
        raise ValueError(f"worker rollout ({ROLLOUT_NAME!r}, 'async') is already {owner!r}")
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = ADAPTER_PATH


def _load_replica() -> type:
    return ArenaReplica


def is_registered() -> bool:
    return (RolloutReplicaRegistry._registry.get(ROLLOUT_NAME) is _load_replica
            and rollout_base._ROLLOUT_REGISTRY.get((ROLLOUT_NAME, "async")) == ADAPTER_PATH)


register_arena_rollout()
