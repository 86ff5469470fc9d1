"""How fast a path could get: the seconds it spends inside the model's compute kernels.

A speed-up of the code around the kernels (Python, copies, masks, caches) cannot take a path
below the time its matmuls and attention take. So for a target "new / old <= r", if
kernel_seconds(new) / old > r, the target needs the kernels' work cut (fewer or cheaper FLOPs:
a shorter prompt, a smaller model, lower precision), not faster code; the same bound reads
"ratio old / new <= old / kernel_seconds(new)" for a throughput target.

The time is the torch profiler's self CPU time of KERNELS during one call of the path (the
profiler adds a little to the Python around them, not to the kernels).
"""
from __future__ import annotations

from typing import Callable

# matmuls (projections, MLP, lm head, their backward) and attention, forward and backward
KERNELS = (
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_attention_math",
)


def kernel_seconds(call: Callable[[], object]) -> float:
    """Self CPU seconds inside KERNELS during one `call()`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in KERNELS) / 1e6
