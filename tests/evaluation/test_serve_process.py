"""`arena serve` as a real process on 127.0.0.1, driven by `arena eval` over HTTP. Slow: two CLI
start-ups (torch, transformers), budget 60 s on the 2-core box."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import ENV_ARGS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_arena_serve_process(bc_checkpoint, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", f"model.path={bc_checkpoint}", f"port={port}",
                               "served_name=bc"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 45
        while True:
            assert server.poll() is None, server.stdout.read().decode()
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).json()
                break
            except httpx.HTTPError:
                assert time.time() < deadline, "arena serve did not come up"
                time.sleep(0.2)
        assert [m["id"] for m in models["data"]] == ["bc"]
        out = tmp_path / "e"
        run = subprocess.run([sys.executable, "-m", "arena.cli", "eval", *ENV_ARGS, "policy=openai", "model=bc",
                              f"base_url=http://127.0.0.1:{port}/v1", "api_key_env=", "model.prompt_template=minimal",
                              "max_tokens=8", "n=4", f"out={out}"], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["n_eval"] == 4 and summary["requests"] >= 4 and summary["completion_tokens"] > 0
    finally:
        server.terminate()
        server.wait(timeout=15)
