"""How fast a path could get: the seconds it spends inside the model's compute kernels.

A speed-up of the code around the kernels (Python, copies, masks, caches) cannot take a path
below the time its matmuls and attention take. So for a target "new / old <= r", if
kernel_seconds(new) / old > r, the target needs the kernels' work cut (fewer or cheaper FLOPs:
a shorter prompt, a smaller model, lower precision), not faster code; the same bound reads
"ratio old / new <= old / kernel_seconds(new)" for a throughput target.

The time is measured two ways per distinct kernel call (op, input shapes, scalar arguments) of one
call of the path, and the smaller counts, so that the floor is a lower bound:
- profiled: the torch profiler's self CPU time of the op in the path (the profiler adds a little to
  every op, and where it changes the allocator's state, to a large op's first touch of memory);
- replayed: the same op on fresh tensors of the same shapes and dtypes, run repeatedly outside the
  profiler, so hot in cache (the path's call may find its inputs cold; the replay never does).
"""
from __future__ import annotations

import time
from typing import Callable, Optional

import torch

from arena.lm.micro_threads import own_ops_on_one_thread

# matmuls (projections, MLP, lm head, their backward) and attention, forward and backward
KERNELS = (
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_attention_math",
    "mkldnn::_linear_pointwise",  # the model's linear layers on oneDNN (arena/lm/linear_kernel.py)
)
REPLAYS = 10  # timed replays of each distinct call (after one untimed)


def _replay_fn(name: str, shapes: tuple, dtypes: tuple, scalars: tuple) -> Optional[Callable[[], object]]:
    """A no-argument function running the op once on fresh inputs of `shapes`, or None where the
    op is not replayed (the math attention: a composite whose inner matmuls are counted anyway;
    any input of another dtype than float32)."""
    if name == "aten::_scaled_dot_product_attention_math" or any(d not in ("float", "Scalar", "ScalarList", "") for d in dtypes):
        return None
    tensors = [torch.randn(shape) if dtype == "float" and shape else None for shape, dtype in zip(shapes, dtypes)]
    ops = torch.ops.aten
    if name == "aten::mm":
        return lambda: ops.mm(tensors[0], tensors[1])
    if name == "aten::bmm":
        return lambda: ops.bmm(tensors[0], tensors[1])
    if name == "aten::addmm":
        return lambda: ops.addmm(tensors[0], tensors[1], tensors[2], beta=scalars[3], alpha=scalars[4])
    if name == "aten::baddbmm":
        return lambda: ops.baddbmm(tensors[0], tensors[1], tensors[2], beta=scalars[3], alpha=scalars[4])
    if name == "mkldnn::_linear_pointwise":  # (input, weight, bias or None, "none", [], ""): onednn_linear's call
        from arena.lm.linear_kernel import onednn_linear

        x, w, b = tensors[:3]
        return lambda: onednn_linear(x, w, b)
    if name == "aten::_scaled_dot_product_flash_attention_for_cpu":
        q, k, v, _, _, mask, _ = tensors  # mask: an additive float mask or None
        return lambda: ops._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p=scalars[3], is_causal=scalars[4], attn_mask=mask, scale=scalars[6])
    if name == "aten::_scaled_dot_product_flash_attention_for_cpu_backward":
        grad, q, k, v, out, lse, _, _, mask, _ = tensors
        return lambda: ops._scaled_dot_product_flash_attention_for_cpu_backward(
            grad, q, k, v, out, lse, scalars[6], scalars[7], attn_mask=mask, scale=scalars[9])
    return None


def _replayed_seconds(fn: Callable[[], object]) -> float:
    """Seconds of one call of fn, hot: the mean of REPLAYS calls after one untimed call."""
    fn()
    start = time.perf_counter()
    for _ in range(REPLAYS):
        fn()
    return (time.perf_counter() - start) / REPLAYS


def kernel_calls(call: Callable[[], object]) -> dict[tuple, list]:
    """{(op, input shapes, dtypes, scalar arguments): [count, profiled self seconds]} of one `call()`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        call()
    calls: dict[tuple, list] = {}
    for event in prof.events():
        if event.name in KERNELS:
            scalars = tuple(value if not isinstance(value, list) else tuple(value) for value in event.concrete_inputs)
            key = (event.name, tuple(tuple(s) for s in event.input_shapes), tuple(event.input_dtypes), scalars)
            entry = calls.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += event.self_cpu_time_total / 1e6
    return calls


def floor_seconds(calls: dict[tuple, list]) -> float:
    """Per distinct kernel call of `kernel_calls`, the smaller of its profiled time and its count
    times its replayed time (module docstring), summed."""
    total = 0.0
    for (name, shapes, dtypes, scalars), (count, profiled) in calls.items():
        fn = _replay_fn(name, shapes, dtypes, scalars)
        total += profiled if fn is None else min(profiled, count * _replayed_seconds(fn))
    return total


def kernel_seconds(call: Callable[[], object], threads: Optional[int] = None) -> float:
    """Seconds one `call()` needs inside KERNELS at the least (module docstring), as it runs now, or
    with `threads` given, on that many threads: its one-thread time / threads. The profiler sees
    only the thread that starts it, and with several threads arena runs its micro-batches and its
    sampler's chunks on worker threads (arena/lm/micro_threads.py); on one thread every kernel runs
    in the calling thread, and no schedule spreads that work over `threads` cores in less than
    1/threads of it."""
    if threads is None:
        return floor_seconds(kernel_calls(call))
    with own_ops_on_one_thread():  # the call on one torch thread, the count put back after
        return floor_seconds(kernel_calls(call)) / threads
