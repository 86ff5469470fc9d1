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
- torch.distributed's backend string: verl initialises its process groups with
  `backend=f"cpu:gloo,{device}:{collective backend}"` (verl/utils/distributed.py), which on
  this platform is "cpu:gloo,cpu:gloo", and torch refuses it (`ValueError: Duplicate device
  type cpu in backend string: gloo`). verl has no extension point for that string, so in the
  processes of a CPU run (`$VERL_PLATFORM=cpu`) `dedupe_backend_strings` wraps
  `torch.distributed.init_process_group` to drop a repeated "device:backend" entry; nothing
  else changes.
- pinned memory: verl's FSDP2 engine wraps a forward-only model (the KL reference) with
  `CPUOffloadPolicy(pin_memory=True)` whatever the config says (fsdp/transformer_impl.py), and
  pinning needs an accelerator (`RuntimeError: Cannot access accelerator device when none is
  available.` from torch's `_init_sharded_param`). `unpinned_offload` makes that policy
  unpinned in the processes of a CPU run (the memory is already the CPU's).
- `$VERL_ENGINE_DEVICE=cuda`: `EngineRegistry` lists the FSDP engine only for devices
  cuda/npu (fsdp/transformer_impl.py), so the lookup fails with `ValueError: No engine
  registered for device='cpu', vendor='cpu', model_type='language_model', backend='fsdp2'`;
  verl's own override of the lookup key picks the same, device-agnostic `FSDPEngineWithLMHead`
  (it places tensors with the platform's device, "cpu").
- the device module: verl calls `get_torch_device().memory_reserved()` and other memory and
  cache functions that `torch.cpu` does not have (`AttributeError: module 'torch.cpu' has no
  attribute 'memory_reserved'`, verl/utils/memory_utils.py): `CPUDeviceModule` adds them.
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
- `rollout.agent.num_workers=1`: one agent-loop worker instead of verl's 8 processes.
- `trainer.n_gpus_per_node=1`: one worker process, in one of the "GPU" slots that the run's
  private Ray head declares for a CPU run (`CPUPlatform.ray_resource_name`): verl sizes its
  resource pools in GPUs and refuses a cluster without them (`ValueError: Total available
  GPUs 0 is less than total desired GPUs 1`).
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager

import torch
import torch.distributed
from verl.plugin.platform import platform_manager
from verl.plugin.platform.platform_base import PlatformBase

from .launch import CPU_RUN_WORKERS

PLATFORM_NAME = "cpu"
# env vars of every process of a device=cpu run (driver and Ray runtime env); the engine lookup
# key: verl registers its FSDP engines for devices cuda/npu only (module docstring)
CPU_ENV = {"VERL_PLATFORM": PLATFORM_NAME, "VERL_USE_EXTERNAL_MODULES": __name__, "VERL_ENGINE_DEVICE": "cuda"}


class CPUDeviceModule:
    """`torch.cpu` plus what verl calls on a device module (`get_torch_device()`) and torch.cpu
    lacks: memory statistics (0: host memory is not tracked), cache and IPC no-ops, and the RNG
    state (torch's CPU generator). Everything else is torch.cpu's own."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    @staticmethod
    def _zero(*args, **kwargs) -> int:
        return 0

    memory_allocated = memory_reserved = max_memory_allocated = max_memory_reserved = _zero

    @staticmethod
    def _nothing(*args, **kwargs) -> None:
        return None

    empty_cache = ipc_collect = set_per_process_memory_fraction = reset_peak_memory_stats = _nothing

    @staticmethod
    def mem_get_info(*args, **kwargs) -> tuple[int, int]:
        return 0, 0  # (free, total): verl only logs it

    @staticmethod
    def get_device_name(*args, **kwargs) -> str:
        return "cpu"

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    @staticmethod
    def get_rng_state(*args, **kwargs) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state, *args, **kwargs) -> None:
        torch.set_rng_state(state)


@platform_manager.PlatformRegistry.register(platform=PLATFORM_NAME)
class CPUPlatform(PlatformBase):
    """verl platform for a CPU-only process: device "cpu", collectives over gloo."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = CPUDeviceModule()  # verl's `get_torch_device()`: torch.cpu has no memory stats

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
        # One "GPU" slot per worker process: verl sizes its resource pools in GPUs and checks
        # them against Ray's GPU count (ResourcePoolManager._check_resource_available:
        # `ValueError: Total available GPUs 0 is less than total desired GPUs 1`), so a CPU
        # run's Ray head declares n_gpus_per_node GPU slots (main.RayCluster). torch never
        # uses them: this platform's device is "cpu".
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


def dedupe_backend_strings() -> None:
    """Wrap torch.distributed.init_process_group so that a backend string with a repeated entry
    ("cpu:gloo,cpu:gloo", module docstring) keeps each entry once. Idempotent."""
    original = torch.distributed.init_process_group
    if getattr(original, "_arena_dedupes_backends", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        backend = kwargs.get("backend", args[0] if args else None)
        if isinstance(backend, str) and "," in backend:
            backend = ",".join(dict.fromkeys(part.strip() for part in backend.split(",")))
            if args:
                args = (backend, *args[1:])
            else:
                kwargs["backend"] = backend
        return original(*args, **kwargs)

    init_process_group._arena_dedupes_backends = True
    torch.distributed.init_process_group = init_process_group


def unpinned_offload() -> None:
    """FSDP2's CPUOffloadPolicy without pinned memory (module docstring). Idempotent."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    original = CPUOffloadPolicy.__init__
    if getattr(original, "_arena_unpinned", False):
        return

    @functools.wraps(original)
    def init_unpinned(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self.pin_memory = False

    init_unpinned._arena_unpinned = True
    CPUOffloadPolicy.__init__ = init_unpinned


def use_cpu_platform() -> PlatformBase:
    """Make verl's platform singleton a CPUPlatform in this process; returns the previous one
    (None if verl had not chosen one yet), for a caller that wants to restore it."""
    previous = platform_manager._current_platform
    platform_manager.set_platform(CPUPlatform())
    dedupe_backend_strings()
    unpinned_offload()
    return previous


FP32_MIXED_PRECISION = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def cpu_overrides() -> dict:
    """verl config keys of a device=cpu run (module docstring: the verl error each avoids)."""
    model = "actor_rollout_ref.model."
    return {
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": CPU_RUN_WORKERS,
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.ref.strategy": "fsdp2",
        model + "override_config": {"attn_implementation": "eager"},
        model + "use_remove_padding": False,
        "actor_rollout_ref.rollout.name": "arena",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,  # arena's sampler is not tensor-parallel
        "actor_rollout_ref.rollout.agent.num_workers": 1,  # verl's default 8 agent-loop actors
        "data.dataloader_num_workers": 0,  # verl's default 8 loader processes for a few parquet rows
        # float32 compute as the embedded backend (verl's FSDP default is bf16 parameters in the
        # forward/backward: a different loss and gradient, and no speed-up on a CPU)
        "actor_rollout_ref.actor.fsdp_config.mixed_precision": FP32_MIXED_PRECISION,
        "actor_rollout_ref.ref.fsdp_config.mixed_precision": FP32_MIXED_PRECISION,
    }


if os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME:  # a process of a device=cpu run
    dedupe_backend_strings()
    unpinned_offload()
