"""verl on the CPU (`backend=verl device=cpu`): a platform plugin and the config it needs.

verl finds its device through a platform singleton (verl/plugin/platform/platform_manager.py).
`_detect_platform_name` honours $VERL_PLATFORM, and `import verl` imports the modules listed in
$VERL_USE_EXTERNAL_MODULES first; `CPU_ENV` sets both, so every process of a run (the driver,
the TaskRunner actor, every Ray worker: the env vars travel in Ray's runtime env) registers
`CPUPlatform` as "cpu" through `PlatformRegistry.register` on import of this module, and
selects it. Without it verl falls back to "nvidia" and `create_device_mesh`
(verl/workers/engine/fsdp/utils.py) fails inside torch with
`AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'`.

What else a CPU run changes in verl's config (`cpu_overrides`), and the verl error each avoids:
- `trainer.device=cpu`: verl's default "cuda" places tensors on a device that does not exist.
- `actor_rollout_ref.{actor,ref}.strategy=fsdp2`: FSDP1 wraps with `sync_module_states=True`,
  and torch raises `ValueError: The module has CPU parameters or buffers when
  sync_module_states=True, which requires them to be on GPU` (fsdp/transformer_impl.py);
  FSDP2 (`fully_shard`) runs over gloo (`communication_backend_name`).
- `actor_rollout_ref.model.override_config.attn_implementation=eager`: `HFModelConfig`
  defaults to flash_attention_2, which needs CUDA and the flash-attn package.
- `actor_rollout_ref.model.use_remove_padding=false`: the packed (unpadded) path calls
  flash-attn's varlen kernels.
- `actor_rollout_ref.rollout.name=arena`: verl 0.9.1's rollout registry holds only
  vllm/sglang/trtllm, none of which runs on a CPU (docs/verl.md, CPU runs).
- `trainer.n_gpus_per_node=1`: one worker process, which `CPUPlatform.ray_resource_name`
  places on Ray's "CPU" resource instead of a GPU bundle.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from verl.plugin.platform import platform_manager
from verl.plugin.platform.platform_base import PlatformBase

PLATFORM_NAME = "cpu"
# env vars of every process of a device=cpu run (driver and Ray runtime env)
CPU_ENV = {"VERL_PLATFORM": PLATFORM_NAME, "VERL_USE_EXTERNAL_MODULES": __name__}


@platform_manager.PlatformRegistry.register(platform=PLATFORM_NAME)
class CPUPlatform(PlatformBase):
    """verl platform for a CPU-only process: device "cpu", collectives over gloo."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = torch.cpu

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: chosen only by $VERL_PLATFORM or `use_cpu_platform`

    def current_device(self) -> str:
        return "cpu"  # used as `.to(get_device_id())`

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        pass

    def synchronize(self, device_index=None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


def use_cpu_platform() -> PlatformBase:
    """Make verl's platform singleton a CPUPlatform in this process; returns the previous one
    (None if verl had not chosen one yet), for a caller that wants to restore it."""
    previous = platform_manager._current_platform
    platform_manager.set_platform(CPUPlatform())
    return previous


def cpu_overrides() -> dict:
    """verl config keys of a device=cpu run (module docstring: the verl error each avoids)."""
    model = "actor_rollout_ref.model."
    return {
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": 1,
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.ref.strategy": "fsdp2",
        model + "override_config": {"attn_implementation": "eager"},
        model + "use_remove_padding": False,
        "actor_rollout_ref.rollout.name": "arena",
    }
