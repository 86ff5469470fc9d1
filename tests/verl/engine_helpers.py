"""Helpers for tests/verl/test_engine_train_batch.py: verl 0.9.1's FSDP engine on CPU.

What stops verl's FSDP engine on a CPU-only torch, and what is done about it here:
1. verl resolves its device through a platform singleton (verl/plugin/platform/
   platform_manager.py `_detect_platform_name`): with no accelerator it falls back to 'nvidia',
   so `get_device_name()` is "cuda" and `create_device_mesh` (verl/workers/engine/fsdp/
   utils.py:48) calls `init_device_mesh("cuda", ...)`, which fails inside torch with
   `AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'`.
   Fix: verl's own plugin hook `platform_manager.set_platform` with the package's
   `arena.backends.verl.cpu_platform.CPUPlatform` (a `device=cpu` run selects it through
   $VERL_PLATFORM in every process instead).
2. `EngineRegistry` has the FSDP engine only under device "cuda"/"npu"
   (transformer_impl.py:1143), so the test builds `FSDPEngineWithLMHead` itself.
3. strategy "fsdp" (FSDP1) wraps with `sync_module_states=True` and `device_id=get_device_id()`
   (transformer_impl.py:436-447); torch then raises `ValueError: The module has CPU parameters
   or buffers when sync_module_states=True, which requires them to be on GPU`. strategy "fsdp2"
   (`fully_shard`) runs on CPU with gloo, so the test uses it.
4. `HFModelConfig` loads with attn_implementation "flash_attention_2" unless
   `override_config.attn_implementation` says otherwise; the test asks for "eager".
5. The test calls `engine.train_batch` itself and fills the same non-tensor defaults that
   `verl.workers.engine_workers.TrainingWorker.train_batch` would (when this was written,
   TrainingWorker did not import for lack of uvicorn, an undeclared verl dependency now in our
   test extra). TrainingWorker's own steps (LR scheduler, cross-rank metrics, MFU) are not covered.
"""
from __future__ import annotations

import os
import socket
from contextlib import contextmanager

import torch
import torch.distributed as dist
from verl.plugin.platform import platform_manager

from arena.backends.verl import cpu_platform


def use_cpu_platform(monkeypatch) -> None:
    """Make verl's platform singleton arena's CPUPlatform for this test; restored afterwards."""
    monkeypatch.setattr(platform_manager, "_current_platform", platform_manager._current_platform)
    cpu_platform.use_cpu_platform()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def one_process_gloo_group(monkeypatch):
    """A world of one (rank 0) over gloo on 127.0.0.1; destroyed on exit."""
    if dist.is_initialized():
        raise RuntimeError("a torch.distributed process group already exists in this process")
    env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="1", RANK="0", LOCAL_RANK="0")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def response_log_probs(model, prompts: list[list[int]], responses: list[list[int]]) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of each response token, right-padded with 0: [N, T].

    Row j is run alone (no padding): logits at slot P_j - 1 + t predict response token t."""
    width = max(len(r) for r in responses)
    out = torch.zeros(len(prompts), width)  # [N, T]
    with torch.no_grad():
        for j, (p, r) in enumerate(zip(prompts, responses)):
            ids = torch.tensor([p + r])  # [1, P_j + R_j]
            logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)  # [P_j + R_j, V]
            slots = torch.arange(len(p) - 1, len(p) - 1 + len(r))  # [R_j]
            out[j, : len(r)] = logp[slots, torch.tensor(r)]  # [R_j]
    return out


def left_pad(rows: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [N, width] left-padded with 0, mask [N, width] 0/1)."""
    ids = torch.zeros(len(rows), width, dtype=torch.long)  # [N, P]
    mask = torch.zeros(len(rows), width, dtype=torch.long)  # [N, P]
    for j, r in enumerate(rows):
        ids[j, width - len(r):] = torch.tensor(r)
        mask[j, width - len(r):] = 1
    return ids, mask


def right_pad(rows: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [N, width] right-padded with 0, mask [N, width] float 0/1)."""
    ids = torch.zeros(len(rows), width, dtype=torch.long)  # [N, T]
    mask = torch.zeros(len(rows), width)  # [N, T]
    for j, r in enumerate(rows):
        ids[j, : len(r)] = torch.tensor(r)
        mask[j, : len(r)] = 1.0
    return ids, mask
