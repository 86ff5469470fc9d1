"""arena/malloc_tuning.py: glibc keeps freed memory instead of faulting it in again; the switch
turns it off; elsewhere than glibc it does nothing; every verb and every sweep job applies it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import arena.malloc_tuning as malloc_tuning
from arena.malloc_tuning import tune_malloc
from tests.benchmark_module import load_benchmark


def _sampler_faults(switch: str) -> tuple[bool, float]:
    """(tuned?, minor page faults a call) of 3 sampler calls after 2 warm-up ones, in a fresh process:
    benchmarks/bench_malloc.py's child, bench_sampler's batch (128 prompts of 40-80 tokens, 16 new
    tokens, the "small" model). Each call allocates its KV cache (8 blocks of 3 MiB) and prefill
    activations of 1-3 MiB, and frees them all at its end."""
    env = {**os.environ, "ARENA_MALLOC_TUNING": switch, "OMP_NUM_THREADS": "1"}
    child = load_benchmark("bench_malloc").SAMPLER_CHILD
    out = json.loads(subprocess.run([sys.executable, "-c", child, "3"], env=env, capture_output=True, text=True,
                                    check=True).stdout)
    return out["tuned"], out["faults_per_call"]


@pytest.mark.skipif(not malloc_tuning.glibc(), reason="glibc's mallopt only")
def test_a_tuned_process_faults_its_memory_in_once_and_an_untuned_one_at_every_call():
    # Untuned (glibc's defaults): whenever the freed top of the heap is larger than glibc's dynamic
    # trim threshold (twice the largest mmapped block freed so far, a few MiB) it goes back to the
    # kernel, at the end of a call (the 24 MiB cache) and between its prefill chunks, and is faulted
    # in again, 4 KiB a fault: measured 20,326-30,068 faults (~100 MiB) a call (11 runs, glibc 2.36,
    # CI-kind machine). Tuned: blocks below 32 MiB come from the heap and its top is kept below
    # 1 GiB, so a call after the warm-up reuses pages already mapped: measured 3-240 a call (11
    # runs). Each bound sits 4x or more from what was seen.
    tuned, tuned_faults = _sampler_faults("1")
    untuned, untuned_faults = _sampler_faults("0")
    assert (tuned, untuned) == (True, False)
    assert tuned_faults < 1000 < 5000 < untuned_faults, (tuned_faults, untuned_faults)


def test_the_switch_off_leaves_glibcs_defaults(monkeypatch):
    monkeypatch.setattr(malloc_tuning, "_applied", False)
    assert tune_malloc({"ARENA_MALLOC_TUNING": "0"}) is False
    assert malloc_tuning.wanted({"ARENA_MALLOC_TUNING": ""}) and malloc_tuning.wanted({})


def test_another_c_library_is_left_alone(monkeypatch):
    def not_gnu(name):
        raise ValueError(name)  # what os.confstr raises where the name is unknown (musl, macOS)

    monkeypatch.setattr(malloc_tuning, "_applied", False)
    monkeypatch.setattr(malloc_tuning.os, "confstr", not_gnu)
    assert malloc_tuning.glibc() is False and tune_malloc({}) is False


def test_every_verb_and_every_sweep_job_tunes(monkeypatch):
    from arena.cli import main
    from arena.sweeps.job import set_job_env

    calls = []
    monkeypatch.setattr(malloc_tuning, "tune_malloc", lambda *a: calls.append("tuned") or True)
    assert main(["methods"]) == 0
    assert calls == ["tuned"]
    monkeypatch.setattr(os, "environ", dict(os.environ))  # set_job_env writes the job's variables
    set_job_env({"ARENA_GIT_DIRTY": "0"}, None)
    assert calls == ["tuned", "tuned"]
