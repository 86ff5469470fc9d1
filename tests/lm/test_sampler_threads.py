"""The sampler on worker threads (arena/lm/decoding.py with arena/lm/micro_threads.py): on two torch
threads the prefill's chunks and a decode step's row blocks run on worker threads of one torch
thread each, and the results are the one-thread sampler's."""
import threading
import time

import pytest
import torch

from arena.lm import decoding, sampler
from arena.lm.decoding import DECODE_ROWS_PER_WORKER, PREFILL_ROWS, decode_blocks, make_decoder
from arena.lm.micro_threads import ordered_map, own_ops_on_one_thread
from arena.lm.model import build_model
from arena.lm.sampler import left_pad, sample_tokens

V = 48


def _prompts() -> list[list[int]]:
    """260 rows: 256 distinct prompts of 3-30 tokens (8 prefill chunks of 32; 256 // 96 = 2 workers),
    and 4 rows that repeat a prompt (a group's rows: keep(source) right after the prefill)."""
    g = torch.Generator().manual_seed(5)
    lengths = torch.randint(3, 31, (256,), generator=g).tolist()
    prompts = [torch.randint(3, V, (n,), generator=g).tolist() for n in lengths]
    return prompts + prompts[:4]


def _sample(model, prompts, temperature):
    # stop token 5: rows end at different steps, so keep() drops rows between steps
    return sample_tokens(model, prompts, temperature=temperature, max_new_tokens=12, stop_token_ids=[5],
                         pad_token_id=0, generator=torch.Generator().manual_seed(2))


def test_decode_blocks_by_hand():
    # W = min(threads, n // 96) blocks, at least 1; sizes differ by at most one row, longer blocks first
    assert DECODE_ROWS_PER_WORKER == 96
    assert decode_blocks(260, 2) == [slice(0, 130), slice(130, 260)]
    assert decode_blocks(193, 2) == [slice(0, 97), slice(97, 193)]  # 193 // 96 = 2; 193 = 97 + 96
    assert decode_blocks(191, 2) == [slice(0, 191)]  # 191 // 96 = 1: one block
    assert decode_blocks(390, 4) == [slice(0, 98), slice(98, 196), slice(196, 293), slice(293, 390)]  # 98 + 98 + 97 + 97
    assert decode_blocks(500, 1) == [slice(0, 500)]
    assert decode_blocks(3, 8) == [slice(0, 3)]


def test_prefill_on_two_workers_equals_one_thread_bit_for_bit(threads):
    # each chunk is the same computation on one torch thread, whichever thread runs it
    model = build_model(V, size="tiny", seed=4)
    ids, mask = left_pad(_prompts()[:256], 0, "cpu")  # [256, P] each: 8 chunks of 32 rows
    with torch.inference_mode():
        threads(1)
        one = make_decoder(model, 256, ids.shape[1] + 4)
        expected = one.prefill(ids, mask)  # [256, V]
        threads(2)
        two = make_decoder(model, 256, ids.shape[1] + 4)
        assert two.worker_threads == 2 and make_decoder(model, 191, 8).worker_threads == 1  # 191 // 96 = 1
        with own_ops_on_one_thread():
            got = two.prefill(ids, mask)  # [256, V]
    assert torch.equal(got, expected)
    # the slots a prefill wrote (those past it are not initialised: a decode step writes them first)
    assert one.length == two.length == ids.shape[1]
    assert all(torch.equal(a[:, :, : one.length], b[:, :, : one.length])
               for a, b in zip(two.keys + two.values, one.keys + one.values))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_two_threads_sample_what_one_thread_samples(threads, monkeypatch, temperature):
    model = build_model(V, size="tiny", seed=4)
    prompts = _prompts()
    threads(1)
    expected = _sample(model, prompts, temperature)
    calls = []  # (workers, names of the threads that ran the items) of every ordered_map the decoder makes

    def spying_map(fn, items, workers, **kwargs):
        names = []

        def run(item):
            names.append(threading.current_thread().name)
            return fn(item)
        calls.append((workers, names))
        return ordered_map(run, items, workers, **kwargs)

    monkeypatch.setattr(decoding, "ordered_map", spying_map)
    threads(2)
    got = _sample(model, prompts, temperature)
    assert torch.get_num_threads() == 2  # put back after the call
    # the prefill (8 chunks) and the decode steps with >= 192 live rows ran on the two workers
    assert calls[0][0] == 2 and len(calls[0][1]) == 256 // PREFILL_ROWS
    assert any(len(names) == 2 for _, names in calls[1:])  # a decode step in two row blocks
    assert all(name.startswith("micro-batch") for workers, names in calls if workers > 1 for name in names)
    # the same tokens; log-probs equal up to float rounding: a decode step's row blocks run each product
    # on fewer rows, and a BLAS may sum a row's products in another order for another row count (on the
    # machine of run r70 they were bit for bit equal). 1e-4 is ~1000x the rounding of float32 sums of
    # this model's size and ~1000x below what a wrong cache row gives (log-probs differ by O(1)).
    assert [tokens for tokens, _ in got] == [tokens for tokens, _ in expected]
    for (_, logp), (_, want) in zip(got, expected):
        assert torch.allclose(torch.tensor(logp), torch.tensor(want), rtol=0, atol=1e-4)


def test_own_ops_on_one_thread_puts_the_count_back(threads):
    threads(2)
    with own_ops_on_one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"):
        with own_ops_on_one_thread():
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2
    with own_ops_on_one_thread(enabled=False):
        assert torch.get_num_threads() == 2


def test_ordered_map_carries_inference_mode_and_lets_more_items_run(threads):
    threads(2)
    with torch.inference_mode():
        assert all(list(ordered_map(lambda _: torch.is_inference_mode_enabled(), range(3), workers=2)))
    # Item 0 waits (up to 2 s) for item 2 to start. With in_flight=3 item 2 is submitted while item 0
    # still runs, and the worker that finished item 1 takes it: item 0 sees it start. With the default
    # (in_flight = workers = 2) item 2 is submitted only after item 0's result is taken: item 0 times out.
    for in_flight, item_2_started_first in ((3, True), (None, False)):
        started = threading.Event()

        def item(i):
            if i == 2:
                started.set()
            return started.wait(timeout=2.0) if i == 0 else i

        begin = time.perf_counter()
        out = list(ordered_map(item, range(3), workers=2, in_flight=in_flight))
        assert out == [item_2_started_first, 1, 2]
        assert (time.perf_counter() - begin < 1.5) == item_2_started_first


def test_matmul_attention_only_on_intra_op_threads(threads):
    # several torch threads and no worker threads (< 192 distinct prompts): matmul attention; one thread
    # or worker threads (each one torch thread): CPU flash attention, the numbers of before
    model = build_model(V, size="tiny", seed=4)
    threads(1)
    assert not make_decoder(model, 64, 8).attention_by_matmul
    threads(2)
    assert make_decoder(model, 64, 8).attention_by_matmul
    assert not make_decoder(model, 2 * DECODE_ROWS_PER_WORKER, 8).attention_by_matmul  # 2 workers
    assert not make_decoder(model.to(torch.bfloat16), 64, 8).attention_by_matmul  # float32 only


def test_matmul_attention_is_flash_attention_up_to_rounding(threads):
    threads(2)
    model = build_model(V, size="tiny", seed=4)
    decoder = make_decoder(model, 6, 12)
    assert decoder.attention_by_matmul
    g = torch.Generator().manual_seed(9)
    heads, kv_heads, dim = decoder.heads, decoder.kv_heads, decoder.head_dim
    q = torch.randn(6, heads, 1, dim, generator=g)  # [B, Hq, 1, D]
    keys, values = (torch.randn(6, kv_heads, 12, dim, generator=g) for _ in range(2))  # [B, Hkv, S, D] each
    # row b may see keys b .. 11 (row 5 sees 7 keys); the hidden keys and values are huge, so one
    # that leaked into a row's sum would move its output by ~1e4, not ~1e-7
    bias = torch.zeros(6, 1, 1, 12)  # [B, 1, 1, S]
    for b in range(6):
        bias[b, ..., :b] = float("-inf")
        keys[b, :, :b], values[b, :, :b] = 1e4, 1e4
    with torch.inference_mode():
        got = decoder._attend(q, keys, values, bias, 0.25)  # [B, 1, Hq, D]
        decoder.attention_by_matmul = False
        want = decoder._attend(q, keys, values, bias, 0.25)  # [B, 1, Hq, D]: CPU flash attention
    # outputs are averages of N(0, 1) values: |out| < ~3, so float32 rounding stays near 1e-7
    assert got.shape == want.shape == (6, 1, heads, dim)
    assert torch.allclose(got, want, rtol=0, atol=1e-5)


def test_two_intra_op_threads_sample_what_one_thread_samples(threads, monkeypatch):
    # 64 distinct prompts: no worker threads at two threads, so the decode steps take matmul attention
    model = build_model(V, size="tiny", seed=4)
    prompts = _prompts()[:64]
    threads(1)
    expected = _sample(model, prompts, 1.0)
    made = []
    monkeypatch.setattr(sampler, "make_decoder", lambda *a, **k: made.append(make_decoder(*a, **k)) or made[-1])
    threads(2)
    got = _sample(model, prompts, 1.0)
    assert len(made) == 1 and made[0].attention_by_matmul
    # the same tokens, log-probs up to float rounding (1e-4: as in the worker-thread test above)
    assert [tokens for tokens, _ in got] == [tokens for tokens, _ in expected]
    for (_, logp), (_, want) in zip(got, expected):
        assert torch.allclose(torch.tensor(logp), torch.tensor(want), rtol=0, atol=1e-4)
