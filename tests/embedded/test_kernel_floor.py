"""benchmarks/kernel_floor.py: the seconds a call spends inside the model's compute kernels."""
import time

import torch

from tests.benchmark_module import load_benchmark


def load_kernel_floor():
    return load_benchmark("kernel_floor")


def test_kernel_seconds_counts_matmuls_within_the_call_and_nothing_else():
    kf = load_kernel_floor()
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    wall = []

    def matmuls():
        start = time.perf_counter()
        for _ in range(20):
            a @ b  # aten::mm: a kernel
        wall.append(time.perf_counter() - start)

    def elementwise():
        for _ in range(20):
            a + b  # aten::add: not a matmul or attention kernel

    seconds = kf.kernel_seconds(matmuls)
    # 20 mm of 256^3 multiply-adds take real time, and no more than the call itself took
    assert 0 < seconds <= wall[0]
    assert kf.kernel_seconds(elementwise) == 0.0  # only KERNELS are counted


def test_kernel_seconds_counts_attention_forward_and_backward():
    kf = load_kernel_floor()
    q = torch.randn(2, 4, 32, 16, requires_grad=True)

    def attention():
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()

    with torch.profiler.profile() as prof:
        attention()
    names = {e.key for e in prof.key_averages()}
    counted = names & set(kf.KERNELS)
    # the CPU attention kernel of this torch (flash on CPU, or the math path's matmuls) is counted
    assert counted, f"no KERNELS op among {sorted(n for n in names if 'attention' in n or 'mm' in n)}"
    assert kf.kernel_seconds(attention) > 0
