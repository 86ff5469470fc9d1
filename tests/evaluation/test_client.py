"""The chat client against a fault-injecting local server (tests/evaluation/servers.py):
retries with their count, Retry-After, timeouts, the failure after the last retry, and
malformed/truncated replies passed on without a crash or a retry."""
from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from arena.evaluation.client import ApiFailure, ChatClient, parse_retry_after

from .servers import GOOD_REPLY, FaultServer, running_server


def chat_once(server: FaultServer, **kwargs):
    """One request through a fresh client; (reply or exception, seconds taken)."""
    options = {"api_key_env": "", "timeout": 0.3, "max_retries": 3, "backoff": 0.01, "max_wait": 2.0, **kwargs}
    with running_server(server.app()) as url:
        client = ChatClient(url, "m", **options)
        start = time.perf_counter()
        try:
            out = client.chat("Board: #P#", tag="ep-1")
        except ApiFailure as exc:
            out = exc
        finally:
            client.close()
    return out, time.perf_counter() - start


def test_429_honours_retry_after_and_is_counted():
    server = FaultServer({1: "429"}, retry_after="0.4")
    reply, seconds = chat_once(server)
    # backoff alone waits at most backoff * 2^1 = 0.02 s; the 0.4 s can only come from Retry-After
    assert reply.text == GOOD_REPLY and reply.retries == 1 and seconds >= 0.4
    assert [fault for _, fault in server.log] == ["429", "ok"]


def test_500_and_hang_are_retried_then_succeed():
    # request 2 hangs for 1 s > the client's 0.3 s timeout: a timeout, retried like a 5xx
    server = FaultServer({1: "500", 2: "hang", 3: "500"}, hang_s=1.0)
    reply, seconds = chat_once(server, max_retries=3)
    assert reply.text == GOOD_REPLY and reply.retries == 3 and seconds < 2.0
    assert [fault for _, fault in server.log] == ["500", "hang", "500", "ok"]
    assert reply.prompt_tokens == 2 and reply.completion_tokens == 3  # the server's usage block


def test_clear_failure_after_the_last_retry():
    server = FaultServer({1: "500", 2: "500", 3: "500"})
    failure, _ = chat_once(server, max_retries=2)
    # 1 attempt + 2 retries = 3 requests, then a clear error naming the cause and the count
    assert isinstance(failure, ApiFailure) and "gave up after 3 attempts" in str(failure) and "HTTP 500" in str(failure)
    assert len(server.log) == 3


def test_other_4xx_fail_at_once():
    server = FaultServer({1: "400"})
    failure, _ = chat_once(server)
    assert isinstance(failure, ApiFailure) and "HTTP 400" in str(failure) and "not retried" in str(failure)
    assert len(server.log) == 1


@pytest.mark.parametrize("fault, text, malformed", [("malformed", "", True), ("truncated", GOOD_REPLY[: len(GOOD_REPLY) // 2], False)])
def test_malformed_and_truncated_replies_are_not_retried(fault, text, malformed):
    server = FaultServer({1: fault})
    reply, _ = chat_once(server)
    assert (reply.text, reply.malformed, reply.retries, len(server.log)) == (text, malformed, 0, 1)


def test_key_from_the_named_variable_only(monkeypatch):
    monkeypatch.delenv("ARENA_NO_SUCH_KEY", raising=False)
    with pytest.raises(KeyError):
        ChatClient("http://127.0.0.1:9/v1", "m", api_key_env="ARENA_NO_SUCH_KEY")
    monkeypatch.setenv("ARENA_TEST_KEY", "sk-test-123")
    server = FaultServer({})
    reply, _ = chat_once(server, api_key_env="ARENA_TEST_KEY")
    assert reply.text == GOOD_REPLY and server.auth == {"Bearer sk-test-123"}


def test_parse_retry_after():
    assert parse_retry_after("2") == 2.0 and parse_retry_after("0.25") == 0.25
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    # an HTTP date 30 s ahead -> about 30 s (the date has 1 s resolution)
    assert 28.0 <= parse_retry_after(formatdate(time.time() + 30, usegmt=True)) <= 31.0
    assert parse_retry_after(formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_request_body_for_reasoning_models():
    # o-series / gpt-5 style: max_completion_tokens, and no temperature or top_p at all
    server = FaultServer({})
    reply, _ = chat_once(server, max_tokens=77, max_tokens_field="max_completion_tokens", temperature=None, top_p=None)
    assert reply.text == GOOD_REPLY
    body = server.bodies[0]
    assert body["max_completion_tokens"] == 77 and not {"max_tokens", "temperature", "top_p"} & set(body)
    assert body["messages"] == [{"role": "user", "content": "Board: #P#"}] and body["model"] == "m"
    # the defaults: max_tokens and greedy sampling parameters are sent
    server = FaultServer({})
    chat_once(server, max_tokens=5)
    assert {k: server.bodies[0][k] for k in ("max_tokens", "temperature", "top_p")} == {"max_tokens": 5, "temperature": 0.0, "top_p": 1.0}
