"""Micro-batches on worker threads, one torch thread each, when the process has several.

The RL step's micro-batches are small (at most 64 rows of ~100 tokens on Sokoban): their products,
attention and elementwise ops split poorly over torch's intra-op threads. Measured on a 2-core
CPU (docs/testbed.md, "Micro-batches on worker threads"): two intra-op threads ran a
Sokoban update's forwards and backwards 1.13x faster than one, CPU flash attention of a reply
(8 queries against ~90 keys) was slower on two threads than on one, while two micro-batches on two
worker threads of one torch thread each ran 1.35-1.45x faster than one thread. The sampler's
decoder (decoding.py) runs a large batch's prefill chunks and decode-step row blocks the same way.

`ordered_map(fn, items, workers)` runs fn on each item and yields the results in the items' order:
in the calling thread when workers <= 1, else on `workers` threads, with torch's intra-op threads
set to threads // workers (>= 1) for the duration and put back afterwards, and each worker under
the caller's grad mode (a thread-local flag: a worker would otherwise run with gradients inside a
`torch.no_grad()` caller) and inference mode. At most `workers` items (or `in_flight`) are in flight, so at
most that many results wait.
Which thread ran an item changes nothing in its numbers. With at least as many items as torch
threads (two threads and two or more micro-batches: the RL step's case) each worker has one torch
thread, so each item's numbers are a one-thread process's; the callers sum the results in the
items' order (update.py: the gradients), and the step equals the one-thread run bit for bit.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")
_POOLS: dict[int, ThreadPoolExecutor] = {}  # workers -> the process's pool of that size, kept for its life
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    """A forked child has none of its parent's threads: a pool it inherited would queue work that no
    thread runs. The child starts with no pools (and a fresh lock) and makes its own."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of `workers` threads. Kept, not made per call: a new thread starts with
    empty per-thread state (its malloc arena, oneDNN's and MKL's buffers), and refilling it at every
    mini-batch cost more than the threads gained (docs/testbed.md, "Micro-batches on worker threads")."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="micro-batch")
        return _POOLS[workers]


def worker_count(n_items: int, device: torch.device | str = "cpu") -> int:
    """Threads for n_items micro-batches: min(torch's intra-op threads, n_items) on the CPU, 1 on
    any other device (a GPU runs one stream) or when either is 1."""
    if torch.device(device).type != "cpu":
        return 1
    return max(1, min(torch.get_num_threads(), n_items))


@contextmanager
def own_ops_on_one_thread(enabled: bool = True) -> Iterator[None]:
    """Until exit, the calling thread's own torch ops run on one torch thread (its count put back
    after), when enabled: for a caller whose heavy work runs on workers (ordered_map) and whose own
    ops between two maps are small (the sampler's token choice between decode steps). Measured on a
    2-core CPU (docs/testbed.md, "The sampler on worker threads"): with its own ops on two threads the
    sampler's decode steps on two workers took 1.5x as long as on one (an OpenMP helper thread of
    the caller's last parallel region, waiting actively, likely held a core the workers needed); with
    them on one thread, 0.85x."""
    if not enabled:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int, *, threads: int | None = None,
                in_flight: int | None = None) -> Iterator[R]:
    """fn(item) for each item, in the items' order (module docstring). `threads`: the torch threads
    the workers share (default: the calling thread's count). `in_flight`: items submitted and not
    yet yielded, at most (default `workers`; more lets a worker start the next item while the
    oldest one still runs elsewhere, at the cost of more results waiting)."""
    if workers <= 1:
        yield from map(fn, items)
        return
    own_threads = torch.get_num_threads()
    per_worker = max(1, (threads or own_threads) // workers)
    limit = max(workers, in_flight or workers)  # items submitted and not yet yielded, at most
    grad_enabled, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def run(item: T) -> R:
        if torch.get_num_threads() != per_worker:  # this thread's own count (OpenMP's is per thread)
            torch.set_num_threads(per_worker)
        with torch.inference_mode(inference), torch.set_grad_enabled(grad_enabled):
            return fn(item)

    torch.set_num_threads(per_worker)
    pending: deque = deque()
    try:
        pool = _pool(workers)
        for item in items:
            pending.append(pool.submit(run, item))
            if len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # an item failed or the caller stopped early: let the rest finish first
            future.cancel() or future.exception()
        torch.set_num_threads(own_threads)
