"""`arena serve` cannot be wedged by one request (docs/eval.md, arena serve): bad values are a
400 naming the field (OpenAI's ranges, as vLLM checks them), max_tokens is capped by the
context, the body by max_body_bytes, each request by request_timeout, and SIGTERM stops a
decode in flight within seconds."""
from __future__ import annotations

import signal
import socket
import threading
import time

import httpx
import pytest

from arena.evaluation.server import build_app, make_server

from .servers import running_server

BODY = {"model": "bc-tiny", "messages": [{"role": "user", "content": "go"}], "temperature": 0, "max_tokens": 4}


@pytest.mark.parametrize("field, value", [
    ("temperature", float("nan")), ("temperature", 2.5), ("temperature", "0.5"), ("top_p", 0), ("top_p", 1.5),
    ("max_tokens", 0), ("max_completion_tokens", -1), ("n", 0), ("n", "two"), ("seed", "abc"), ("seed", 2 ** 70),
    ("seed", 1.5), ("stream", "yes")])
def test_a_bad_value_is_a_400_naming_its_field(served_checkpoint, field, value):
    import json

    # json.dumps writes NaN as the bare token NaN, which Python's JSON parser (the server's) reads
    raw = json.dumps({**BODY, field: value})
    response = httpx.post(served_checkpoint + "/chat/completions", content=raw,
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == field


def test_max_tokens_past_the_context_is_refused_at_once(served_checkpoint):
    t0 = time.time()
    response = httpx.post(served_checkpoint + "/chat/completions", json={**BODY, "max_tokens": 2_000_000}, timeout=30)
    assert response.status_code == 400 and response.json()["error"]["param"] == "max_tokens"
    assert "maximum context length" in response.json()["error"]["message"] and time.time() - t0 < 5
    models = httpx.get(served_checkpoint + "/models", timeout=30).json()["data"][0]
    assert models["max_model_len"] > 4  # the cap it applies: the model's context


def test_a_body_over_the_limit_is_refused_before_it_is_read(served_checkpoint):
    host, port = served_checkpoint.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # announces 50 MB (the default limit is 1 MiB) and sends 1 KB of it
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 50000000\r\n\r\n" + b"{" * 1024)
        assert sock.recv(4096).split(b"\r\n")[0] == b"HTTP/1.1 413 Request Entity Too Large"


@pytest.fixture
def endless(tmp_path, one_thread):
    """A fresh tiny model with a 64k context whose decoding never stops before max_tokens."""
    from arena.lm.model import build_model, save_checkpoint
    from arena.lm.tokenizer import build_tokenizer
    from arena.evaluation.local_model import LocalModel

    tok = build_tokenizer(["go left go right"], kind="wordlevel", vocab_size=32)
    save_checkpoint(build_model(len(tok), size="tiny", max_positions=1 << 16), tok, tmp_path / "m")
    local = LocalModel(str(tmp_path / "m"))
    local.stop_ids = []
    return local


LONG = {**BODY, "max_tokens": 60_000}  # minutes of decoding on a CPU if nothing stops it


def test_each_request_times_out(endless):
    with running_server(build_app(endless, "endless", request_timeout=0.5)) as url:
        t0 = time.time()
        response = httpx.post(url + "/chat/completions", json=LONG, timeout=60)
        assert response.status_code == 504 and "request_timeout" in response.json()["error"]["message"]
        assert time.time() - t0 < 5


def test_sigterm_stops_a_decode_in_flight_within_seconds(endless):
    app = build_app(endless, "endless")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = make_server(app, host="127.0.0.1", port=sock.getsockname()[1])
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    replies = []
    asker = threading.Thread(target=lambda: replies.append(httpx.post(
        f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions", json=LONG, timeout=120)))
    asker.start()
    time.sleep(1.0)  # the decode is under way
    t0 = time.time()
    server.handle_exit(signal.SIGTERM, None)  # what uvicorn's SIGTERM handler calls
    thread.join(timeout=15)
    asker.join(timeout=15)
    assert not thread.is_alive() and time.time() - t0 < 6
    assert replies and replies[0].status_code == 503
