"""`arena eval` as a real process: killed (SIGKILL) mid-run and rerun, against a slow local
fault server. Slow: two CLI start-ups and ~100 requests, budget 60 s on the 2-core box."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from arena.evaluation.episodes import load_cached

from .conftest import ENV_ARGS, FAKE_KEY
from .servers import FaultServer, running_server

pytestmark = pytest.mark.slow


def arena_eval(url: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "arena.cli", "eval", *ENV_ARGS, "policy=openai", "model=fake", f"base_url={url}",
            "api_key_env=ARENA_TEST_KEY", "model.prompt_template=minimal", "n=10", "concurrency=2",
            "retry.backoff=0.01", "timeout=2", f"out={out}"]


def test_kill_and_rerun_pays_no_episode_twice(tmp_path):
    env = {**os.environ, "ARENA_TEST_KEY": FAKE_KEY, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = tmp_path / "e"
    # every 7th request is a 500 (retried); each request takes 50 ms, so the run lasts seconds
    server = FaultServer({n: "500" for n in range(7, 400, 7)}, delay_s=0.05)
    with running_server(server.app()) as url:
        proc = subprocess.Popen(arena_eval(url, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=Path(__file__).resolve().parents[2])
        deadline = time.time() + 45
        while len(list((out / "episodes").glob("*.json"))) < 3:
            assert proc.poll() is None and time.time() < deadline, "eval ended or stalled before the kill"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        first_output = proc.communicate(timeout=10)[0].decode()
        cached = load_cached(out)
        assert 3 <= len(cached) < 10 and not (out / "summary.json").exists()
        start = len(server.log)
        second = subprocess.run(arena_eval(url, out), env=env, capture_output=True, text=True, timeout=60,
                                cwd=Path(__file__).resolve().parents[2])
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{len(cached)} cached, {10 - len(cached)} to play" in second.stdout
    # no request of the rerun belongs to an episode cached before the kill
    tags = Counter(tag.rsplit(":", 1)[1] for tag, _ in server.log[start:])
    assert not set(tags) & {str(i) for i in cached}
    final = load_cached(out)
    assert sorted(final) == list(range(10))
    # turn level: every billed reply is in some record, except at most one per episode whose
    # reply arrived at the server's side while the process was being killed (concurrency 2)
    paid = Counter({tag.rsplit(":", 1)[1]: n for tag, n in server.paid().items()})
    lost = {i: paid[str(i)] - final[i]["requests"] for i in final}
    assert all(0 <= extra <= 1 for extra in lost.values()) and sum(lost.values()) <= 2, lost
    assert not list((out / "episodes").glob("*.partial.jsonl"))
    assert not list((out / "episodes").glob(".*.tmp"))  # a kill mid-write left no temp file behind
    assert all(final[i] == cached[i] for i in cached)  # the cached records were not rewritten
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_eval"] == 10 and summary["retries"] >= 1
    # the fake key: used, but in no file and no output of either process
    assert server.auth == {f"Bearer {FAKE_KEY}"}
    for path in out.rglob("*"):
        if path.is_file():
            assert FAKE_KEY not in path.read_text(errors="replace"), path
    assert FAKE_KEY not in first_output + second.stdout + second.stderr
