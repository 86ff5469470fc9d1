"""A chat-completions client that survives real APIs (docs/eval.md, The client).

One request = one POST `<base_url>/chat/completions` with a single user message. httpx sends
it; tenacity retries it:
- retried: HTTP 429, 408 and every 5xx, timeouts, and connection/transport errors;
- wait before retry k (k = 1, 2, ...): the server's Retry-After (seconds or an HTTP date) when
  it sends one, else a random wait in [0, min(max_wait, backoff * 2^k)] ("full jitter"); every
  wait is capped at `max_wait`;
- after `max_retries` retries the request fails with ApiFailure, whose message names the last
  error and the number of attempts; other 4xx (bad request, auth) fail at once.
A 200 reply whose body is not the chat-completions JSON (malformed JSON, no choices, content
not a string) is NOT retried: it becomes an empty reply flagged `malformed`, which the agent
protocol then counts as an invalid action. Truncated text is passed on as it is. But an
endpoint that answers nothing else is broken, not a policy that loses: once the first
`MALFORMED_ABORT` replies of a client are all malformed, every further request fails with
ApiFailure (no more requests are paid for), and `all_malformed()` tells the eval to fail.

The API key is read from the environment variable named by `api_key_env` when the client is
built, sent only in the Authorization header, and never logged: error messages carry the
status, the URL path and at most 200 characters of the response body, with the key replaced by
"[redacted]" should a server echo it. A key must be printable ASCII without spaces: one with a
control character (a CRLF key file, a secret file's trailing newline), whitespace or a
non-ASCII character is refused when the client is built (`BadApiKey`, naming the variable,
never the value), since an HTTP library would print such a header's bytes in its error.
`redact` replaces every form of the key (raw, stripped, Python and bytes repr, JSON-escaped,
URL-encoded) in any text that leaves the process.
"""
from __future__ import annotations

import email.utils
import json
import os
import random
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Optional

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

RETRY_STATUS = (408, 429)  # plus every 5xx
MALFORMED_ABORT = 16  # replies, all malformed, after which the endpoint counts as broken


class ApiFailure(RuntimeError):
    """The request failed after its last retry, or with a status that is never retried."""


class BadApiKey(ValueError):
    """The key variable holds a character no Authorization header may carry; the message names
    the variable, never the value."""


def check_key(variable: str, key: str) -> None:
    """Refuse a key that is not printable ASCII without spaces (BadApiKey)."""
    bad = sum(1 for c in key if not "!" <= c <= "~")  # "!" .. "~": the printable ASCII range
    if bad:
        raise BadApiKey(
            f"api_key_env={variable}: the key in ${variable} has {bad} control, whitespace or non-ASCII "
            "character(s) (a CRLF key file, or a trailing newline?); valid: printable ASCII without "
            f"spaces. Strip them, e.g. export {variable}=\"$(tr -d ' \\r\\n' < KEYFILE)\"")


def key_forms(key: str) -> list[str]:
    """Every form in which the key could reach a message, longest first: raw, stripped, the
    Python repr of it as text and as bytes (how HTTP libraries print a bad header), JSON-escaped,
    URL-encoded (quote and quote_plus), each of those once more JSON-escaped (an error body
    quoting a repr), and each run of 8 or more letters and digits in it, which every escaping
    keeps as it is (so a form nested deeper still loses its long runs)."""
    forms = {key, key.strip(), repr(key)[1:-1], repr(key.encode())[2:-1], json.dumps(key)[1:-1],
             urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key)}
    forms |= {json.dumps(form)[1:-1] for form in forms}
    forms |= set(re.findall(r"[A-Za-z0-9]{8,}", key))
    return sorted((form for form in forms if form), key=len, reverse=True)


def redact(text: str, key: Optional[str]) -> str:
    """`text` with every form of `key` (key_forms) replaced by "[redacted]"."""
    for form in key_forms(key) if key else []:
        text = text.replace(form, "[redacted]")
    return text


class RetryableStatus(Exception):
    """An HTTP status worth retrying; carries the server's Retry-After in seconds, if any."""

    def __init__(self, status: int, retry_after: Optional[float], body: str):
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status, self.retry_after = status, retry_after


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0  # retries this request needed (0 = first attempt succeeded)
    malformed: bool = False  # a 200 reply that was not chat-completions JSON
    usage_missing: bool = False  # the reply had no usage block (tokens counted as 0)


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds: a number, or an HTTP date (seconds from now, at least 0)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, (RetryableStatus, httpx.TimeoutException, httpx.TransportError))


def parse_reply(body: bytes) -> Reply:
    """The first choice's text and the usage; a body that is not chat-completions JSON gives
    Reply("", malformed=True)."""
    try:
        data = json.loads(body)
        text = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Reply("", malformed=True)
    if not isinstance(text, str):
        return Reply("", malformed=True)
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return Reply(text, usage_missing=True)
    return Reply(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


class ChatClient:
    """Thread-safe: one httpx connection pool shared by every episode thread."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0,
                 max_retries: int = 5, backoff: float = 0.5, max_wait: float = 60.0, max_tokens: int = 1024,
                 max_tokens_field: str = "max_tokens", temperature: Optional[float] = 0.0, top_p: Optional[float] = 1.0,
                 seed: Optional[int] = None, concurrency: int = 4):
        """temperature / top_p None: not sent (OpenAI reasoning models accept only their defaults)."""
        headers, self._key = {}, None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise KeyError(api_key_env)
            check_key(api_key_env, key)
            headers["Authorization"] = f"Bearer {key}"
            self._key = key
        self.model, self.max_retries, self.backoff, self.max_wait = model, max_retries, backoff, max_wait
        optional = {"temperature": temperature, "top_p": top_p, "seed": seed}
        self.params = {max_tokens_field: max_tokens, **{k: v for k, v in optional.items() if v is not None}}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.http = httpx.Client(base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout, limits=limits)
        self.replies = self.malformed = 0  # 200 replies this client received, and how many were malformed
        self._count_lock = threading.Lock()

    def all_malformed(self) -> bool:
        """Every 200 reply so far was malformed (and there was at least one)."""
        return 0 < self.replies == self.malformed

    def _count(self, reply: Optional[Reply]) -> None:
        """Count a 200 reply (None: count nothing, only check); ApiFailure once MALFORMED_ABORT
        replies came and none was good."""
        with self._count_lock:
            self.replies += reply is not None
            self.malformed += int(reply is not None and reply.malformed)
            broken = self.malformed >= MALFORMED_ABORT and self.all_malformed()
        if broken:
            raise ApiFailure(f"the endpoint answered HTTP 200 with a body that is not chat-completions JSON to each of "
                             f"the {self.malformed} requests so far: it is broken or not an OpenAI-compatible "
                             "chat endpoint (check base_url); stopped asking")

    def close(self) -> None:
        self.http.close()

    def _wait(self, state: RetryCallState) -> float:
        """Retry-After when the server gave one, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryableStatus) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_wait)
        # wait_k ~ U[0, min(max_wait, backoff * 2^k)], k = attempts so far
        return random.uniform(0.0, min(self.max_wait, self.backoff * 2 ** state.attempt_number))

    def redact(self, text: str) -> str:
        """A server that echoes the key in an error body must not put it in our messages."""
        return redact(text, self._key)

    def _post_once(self, payload: dict, headers: dict) -> Reply:
        response = self.http.post("chat/completions", json=payload, headers=headers)
        status = response.status_code
        if status in RETRY_STATUS or status >= 500:
            raise RetryableStatus(status, parse_retry_after(response.headers.get("retry-after")), self.redact(response.text))
        if status != 200:
            body = self.redact(response.text)[:200]
            raise ApiFailure(f"HTTP {status} from {response.request.url.path} (not retried): {body}")
        return parse_reply(response.content)

    def chat(self, prompt: str, *, tag: str = "") -> Reply:
        """One user message -> Reply, with retries (module docstring). `tag` is sent as the
        X-Arena-Episode header so a server's log can tell episodes apart."""
        self._count(None)  # a broken endpoint is asked no more
        payload = {"model": self.model, "messages": [{"role": "user", "content": prompt}], **self.params}
        headers = {"X-Arena-Episode": tag} if tag else {}
        retrying = Retrying(stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
                            retry=retry_if_exception(_is_retryable), reraise=True)
        try:
            reply = retrying(self._post_once, payload, headers)
        except (RetryableStatus, httpx.TimeoutException, httpx.TransportError) as exc:
            attempts = retrying.statistics.get("attempt_number", self.max_retries + 1)
            raise ApiFailure(self.redact(f"{type(exc).__name__}: {exc} (gave up after {attempts} attempts)")) from None
        reply.retries = retrying.statistics.get("attempt_number", 1) - 1
        reply.text = self.redact(reply.text)  # a server that echoes the key in a reply: never recorded
        self._count(reply)
        return reply
