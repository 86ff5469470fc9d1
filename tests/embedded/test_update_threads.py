"""Micro-batches on worker threads (arena/lm/micro_threads.py): the update and the
log-probs on two torch threads give the numbers of a one-thread process, bit for bit."""
import threading

import pytest
import torch

from arena.backends.embedded.trainer import fill_logprobs
from arena.backends.embedded.update import ppo_update
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.micro_threads import ordered_map, worker_count
from arena.lm.model import build_model
from arena.po.compose import resolve

from .test_micro_batches import _real_batch


def _probe(item):
    return item, threading.current_thread().name, torch.get_num_threads(), torch.is_grad_enabled()


def test_ordered_map_keeps_order_and_runs_each_item_on_one_torch_thread(threads):
    threads(2)
    with torch.no_grad():
        out = list(ordered_map(_probe, range(7), workers=2))
    assert [o[0] for o in out] == list(range(7))  # the items' order, whichever thread ran each
    assert all(o[1].startswith("micro-batch") for o in out)  # on the pool's threads
    assert all(o[2] == 1 for o in out)  # 2 torch threads // 2 workers: one each
    assert not any(o[3] for o in out)  # the caller's no_grad holds in the workers too
    assert torch.get_num_threads() == 2  # put back
    # one worker: the calling thread, nothing changed
    assert list(ordered_map(_probe, [0], workers=1)) == [(0, threading.current_thread().name, 2, True)]


def test_ordered_map_passes_a_failure_on_and_restores_the_threads(threads):
    threads(2)

    def fails_on_three(i):
        if i == 3:
            raise ValueError("item 3")
        return i

    got = []
    with pytest.raises(ValueError, match="item 3"):
        for value in ordered_map(fails_on_three, range(6), workers=2):
            got.append(value)
    assert got == [0, 1, 2]
    assert torch.get_num_threads() == 2


def test_worker_count():
    # min(torch threads, micro-batches) on the CPU; 1 off it
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert (worker_count(3), worker_count(1), worker_count(0)) == (2, 1, 1)
        assert worker_count(3, "cuda") == 1
        torch.set_num_threads(1)
        assert worker_count(3) == 1
    finally:
        torch.set_num_threads(before)


def _update(n_threads: int, threads) -> tuple:
    """(parameters, their last gradients, metrics, old/ref log-probs) after ppo_update on n_threads
    torch threads: 12 rows, 2 mini-batches of 6 sorted rows, micro-batches of at most 2 rows, so 3
    per mini-batch, and 2 epochs (off-policy: old_logp from fill_logprobs, the reference's KL)."""
    threads(n_threads)
    torch.manual_seed(0)
    model, ref_model = build_model(64, size="tiny"), build_model(64, size="tiny", seed=1)
    batch, adv = _real_batch()
    fill_logprobs(model, ref_model, batch, 2, True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    metrics = ppo_update(model, opt, resolve({"method": "grpo"}), batch, adv, token_logprobs_and_entropy,
                         num_mini_batches=2, ppo_epochs=2, micro_batch_size=2, sort_micro_batches=True,
                         kl_coef=0.1, entropy_coef=0.01, grad_clip=1e9)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    return params, grads, metrics, batch.old_logp, batch.ref_logp


def test_two_threads_give_the_one_thread_numbers_bit_for_bit(threads):
    one = _update(1, threads)  # one thread: micro-batches one after another, backward() accumulates
    two = _update(2, threads)  # two: two worker threads, gradients summed in micro-batch order
    torch.manual_seed(0)
    start = torch.cat([p.detach().flatten() for p in build_model(64, size="tiny").parameters()])
    assert (one[0] - start).abs().max() > 1e-3  # the update moved the weights
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])
    assert one[2] == two[2]  # every metric
    assert torch.equal(one[3], two[3]) and torch.equal(one[4], two[4])  # old and ref log-probs


def _double_in_threads(queue):
    queue.put(list(ordered_map(lambda i: 2 * i, range(4), workers=2)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_pool(threads):
    import multiprocessing

    threads(2)
    assert list(ordered_map(lambda i: i, range(3), workers=2)) == [0, 1, 2]  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_double_in_threads, args=(queue,))
    child.start()
    child.join(timeout=60)  # the inherited pool has no threads in the child: it would wait forever
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0
    assert queue.get(timeout=5) == [0, 2, 4, 6]
