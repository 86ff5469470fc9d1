"""Local test servers: any FastAPI app on 127.0.0.1 in a background thread, and a
fault-injecting chat-completions server. Both are bounded: the fault server answers at most
`max_requests` requests (then 503 without work) and every hang is at most `hang_s` seconds."""
from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections import Counter

import uvicorn
from fastapi import FastAPI, Request  # module level: the route's annotation must resolve here
from fastapi.responses import JSONResponse, PlainTextResponse


@contextlib.contextmanager
def running_server(app, *, timeout_s: float = 10.0):
    """Serve `app` on 127.0.0.1:<free port> in a thread; yield its /v1 base URL; stop it after."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + timeout_s
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout_s)
        sock.close()


GOOD_REPLY = "<think>plan</think><action>up</action>"


def key_forms(key: str) -> str:
    """The key as a careless server or library might print it: raw, Python repr (text and
    bytes), JSON-escaped, URL-encoded."""
    return " ".join([key, repr(key), repr(key.encode()), json.dumps(key), urllib.parse.quote(key, safe=""),
                     urllib.parse.quote_plus(key)])


class FaultServer:
    """A chat-completions app whose n-th request (1-based, over the whole server) gets the
    fault `plan[n]` (default: a good reply). Faults: "400" (never retried), "401echo" and
    "500echo" (the Authorization header echoed in the error body), "401echoforms" and "200echo"
    (the key echoed in every form, `key_forms`, in an error body and in a good reply), "429" (Retry-After: `retry_after`), "500",
    "hang" (sleeps `hang_s`, longer than the client's timeout), "malformed" (200, body not
    JSON), "truncated" (200, the reply text cut in the middle). Every request is logged as
    (episode header, fault or "ok"); good replies echo `reply`."""

    def __init__(self, plan: dict[int, str], *, reply: str = GOOD_REPLY, retry_after: str = "0.05",
                 hang_s: float = 1.0, max_requests: int = 2000, delay_s: float = 0.0):
        self.plan, self.reply, self.retry_after, self.hang_s = plan, reply, retry_after, hang_s
        self.max_requests, self.delay_s = max_requests, delay_s
        self.log: list[tuple[str, str]] = []
        self.auth: set = set()  # Authorization headers seen
        self.bodies: list[dict] = []  # request bodies, in arrival order
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()

    def paid(self) -> Counter:
        """Good (billable) replies per episode tag."""
        return Counter(tag for tag, fault in self.log if fault in ("ok", "truncated"))

    def app(self):
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            with self.lock:
                n = len(self.log) + 1
                fault = self.plan.get(n, "ok") if n <= self.max_requests else "over"
                self.log.append((request.headers.get("x-arena-episode", ""), fault))
                self.auth.add(request.headers.get("authorization"))
                self.bodies.append(body)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if fault == "over":
                    return PlainTextResponse("request budget of the test server spent", status_code=503)
                if fault == "429":
                    return JSONResponse({"error": {"message": "rate limited"}}, status_code=429,
                                        headers={"Retry-After": self.retry_after})
                if fault in ("401echo", "500echo"):  # a careless server that echoes the credentials
                    status = int(fault[:3])
                    return JSONResponse({"error": {"message": f"bad key {request.headers.get('authorization')}"}},
                                        status_code=status)
                echo = ""  # "200echo": the key's forms after the good reply
                if fault in ("401echoforms", "200echo"):
                    echo = " " + key_forms(request.headers.get("authorization", "").partition(" ")[2])
                    if fault == "401echoforms":
                        return JSONResponse({"error": {"message": f"bad key{echo}"}}, status_code=401)
                if fault == "400":
                    return JSONResponse({"error": {"message": "bad request"}}, status_code=400)
                if fault == "500":
                    return JSONResponse({"error": {"message": "boom"}}, status_code=500)
                if fault == "hang":
                    await asyncio.sleep(self.hang_s)
                    return JSONResponse({"error": {"message": "too late"}}, status_code=504)
                if fault == "malformed":
                    return PlainTextResponse('{"choices": [{"message": {"content": "<think>', status_code=200)
                text = self.reply[: len(self.reply) // 2] if fault == "truncated" else self.reply
                text += echo
                prompt = body["messages"][-1]["content"]
                return JSONResponse({
                    "id": f"x{n}", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 3,
                              "total_tokens": len(prompt.split()) + 3}})
            finally:
                with self.lock:
                    self.in_flight -= 1

        return app


def dump(obj) -> str:
    return json.dumps(obj, sort_keys=True)
