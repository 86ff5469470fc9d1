"""benchmarks/kernel_floor.py: the seconds a call spends inside the model's compute kernels."""
import time

import pytest
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


def test_kernel_calls_are_replayed_with_their_shapes_and_the_floor_takes_the_smaller_time():
    kf = load_kernel_floor()
    q = torch.randn(2, 4, 6, 8, requires_grad=True)  # [B, Hq, L, D]
    kv = torch.randn(2, 2, 6, 8, requires_grad=True)  # [B, Hkv, L, D]: grouped heads, as the model's
    mask = torch.ones(6, 6, dtype=torch.bool).tril()  # [L, L]
    lin = torch.nn.Linear(8, 16)

    def step():
        out = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=mask, enable_gqa=True)  # [2, 4, 6, 8]
        (out.sum() + lin(torch.randn(5, 8)).sum()).backward()  # addmm forward; mm in the backward
        torch.randn(3, 4, 5) @ torch.randn(3, 5, 7)  # bmm

    calls = kf.kernel_calls(step)
    replayed = {name: kf._replay_fn(name, shapes, dtypes, scalars)() for name, shapes, dtypes, scalars in calls}
    # by hand: lin's forward is addmm(bias [16], x [5, 8], W^T [8, 16]) -> [5, 16]; the bmm of
    # [3, 4, 5] @ [3, 5, 7] -> [3, 4, 7]; the attention forward returns (out [2, 4, 6, 8], ...) and
    # its backward (dq [2, 4, 6, 8], dk [2, 2, 6, 8], dv [2, 2, 6, 8])
    assert replayed["aten::addmm"].shape == (5, 16)
    assert replayed["aten::bmm"].shape == (3, 4, 7)
    assert replayed["aten::_scaled_dot_product_flash_attention_for_cpu"][0].shape == (2, 4, 6, 8)
    dq, dk, dv = replayed["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert (dq.shape, dk.shape, dv.shape) == ((2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8))
    assert "aten::mm" in replayed  # the weight's gradient
    # the floor counts each call at most at its profiled time, and every call at some time
    assert 0 < kf.floor_seconds(calls) <= sum(seconds for _, seconds in calls.values())


def test_onednn_linear_calls_are_counted_and_replayed(monkeypatch):
    import arena.lm.linear_kernel as linear_kernel
    from arena.lm.linear_kernel import OneDnnLinear, onednn_available
    if not onednn_available():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setattr(linear_kernel, "ONEDNN_MIN_MACS", 0)  # this product is small: oneDNN all the same
    kf = load_kernel_floor()
    lin = OneDnnLinear(8, 16)
    x = torch.randn(5, 8, requires_grad=True)

    def step():
        lin(x).sum().backward()

    calls = kf.kernel_calls(step)
    replayed = [kf._replay_fn(name, shapes, dtypes, scalars)() for name, shapes, dtypes, scalars in calls]
    # by hand (arena/lm/linear_kernel.py): the 5 rows are padded to padded_rows(5) = 16; y = x W^T + b
    # is a linear of x [16, 8] with W [16, 8] -> [16, 16]; dx = dy W a linear of dy [16, 16] with
    # W^T [8, 16] -> [16, 8]; dW = dy^T x a linear of dy^T [16, 16] with x^T [8, 16] -> [16, 8]:
    # three oneDNN calls, nothing else among KERNELS; the last two have the same input shapes
    # ([16, 16] and [8, 16]), so they are one distinct call counted twice
    assert {name for name, *_ in calls} == {"mkldnn::_linear_pointwise"}
    assert sorted(count for count, _ in calls.values()) == [1, 2]
    assert sorted(out.shape for out in replayed) == [(16, 8), (16, 16)]
    assert 0 < kf.floor_seconds(calls) <= sum(seconds for _, seconds in calls.values())


def test_kernel_seconds_on_several_threads_is_the_one_thread_time_over_threads(monkeypatch):
    kf = load_kernel_floor()
    seen = []  # the torch thread count the call ran at
    monkeypatch.setattr(kf, "floor_seconds", lambda calls: 3.0)  # a known one-thread kernel time

    def call():
        seen.append(torch.get_num_threads())

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        # 3.0 s on one thread spread over 2 threads at best: 1.5 s; run at one thread, count put back
        assert kf.kernel_seconds(call, threads=2) == 1.5
        assert seen == [1] and torch.get_num_threads() == 2
        assert kf.kernel_seconds(call) == 3.0 and seen[-1] == 2  # no threads given: as it runs now
    finally:
        torch.set_num_threads(before)
