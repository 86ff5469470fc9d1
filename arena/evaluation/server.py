"""`arena serve model.path=DIR [port=8000] [host=127.0.0.1] [served_name=NAME] [max_tokens=N]
[max_model_len=N] [max_body_bytes=N] [request_timeout=S]`: an OpenAI-compatible chat-completions
server for any arena or local HF checkpoint (docs/eval.md, arena serve), so that trained
policies and API models are driven by the same client.

Endpoints: `GET /v1/models`, `POST /v1/chat/completions` (non-streaming, n=1). The request's
`temperature` (default 1.0, as OpenAI's), `top_p`, `max_tokens` (or `max_completion_tokens`)
and `seed` are honoured; temperature 0 is greedy. A completion ends at `</action>`, which stays
in the text (as in training), at eos, or after max_tokens (finish_reason "length"). Requests
are served one at a time (one model, one lock). There is no authentication: bind to 127.0.0.1
(the default) unless the network is trusted.

No request can wedge it (docs/eval.md, arena serve: what is checked):
- the body is read only up to `max_body_bytes` (413 beyond);
- every field is validated by pydantic against the OpenAI API's ranges, as vLLM's server does
  (temperature in [0, 2] and finite, top_p in (0, 1], n in [1, 128] (only 1 is served),
  max_tokens >= 1, seed a 64-bit integer): a bad value is a 400 naming the field, never a 500
  or a silent default;
- prompt + max_tokens must fit `max_model_len` (default the model's context), else 400
  naming max_tokens (vLLM's rule); without max_tokens a reply gets min(max_tokens option,
  the room left);
- each request has `request_timeout` seconds, waiting for the model included (504 after);
- SIGTERM/SIGINT abandon a decode in flight before its next token (503) and the server exits.
"""
from __future__ import annotations

import math
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Optional, Union

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_TOKENS = 256
DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: far above any arena prompt
DEFAULT_REQUEST_TIMEOUT = 600.0  # seconds
SHUTDOWN_GRACE_S = 3  # uvicorn's wait for open requests after SIGTERM (a decode stops sooner)
LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 64 - 1  # torch.Generator.manual_seed's (and vLLM's) seed range


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = Field(strict=True)
    content: Union[str, list, None] = None


class ChatRequest(BaseModel):
    """A chat-completions body; unknown OpenAI fields (stop, presence_penalty, ...) are allowed
    and ignored, as vLLM does."""
    model_config = ConfigDict(extra="allow")
    model: Optional[str] = None
    messages: list[Message] = Field(min_length=1)
    stream: Optional[bool] = Field(False, strict=True)
    n: Optional[int] = Field(1, ge=1, le=128, strict=True)
    temperature: Optional[float] = Field(None, ge=0, le=2, allow_inf_nan=False, strict=True)
    top_p: Optional[float] = Field(None, gt=0, le=1, allow_inf_nan=False, strict=True)
    max_tokens: Optional[int] = Field(None, ge=1, strict=True)
    max_completion_tokens: Optional[int] = Field(None, ge=1, strict=True)
    seed: Optional[int] = Field(None, ge=LONG_MIN, le=LONG_MAX, strict=True)


def error(status: int, message: str, param: Optional[str] = None):
    from fastapi.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(status_code=status, content={
        "error": {"message": message, "type": kind, "param": param, "code": status}})


class BodyLimit:
    """ASGI middleware: a body over `max_bytes` is refused with 413, by its Content-Length before
    a byte of it is read, or (chunked) as soon as the bytes read pass the limit."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await error(413, f"the request body may hold at most {self.max_bytes} bytes "
                                    "(server option max_body_bytes)")(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                from fastapi import HTTPException

                raise HTTPException(413, f"the request body may hold at most {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)


def token_budget(requested: Optional[int], prompt_len: int, max_model_len: int, default: int):
    """(max_tokens, None) or (None, error response): prompt + max_tokens must fit max_model_len."""
    room = max_model_len - prompt_len
    if room < 1:
        return None, error(400, f"this model's maximum context length is {max_model_len} tokens; the messages "
                                f"alone use {prompt_len}", "messages")
    if requested is None:
        return min(default, room), None
    if requested > room:
        return None, error(400, f"this model's maximum context length is {max_model_len} tokens; you requested "
                                f"{prompt_len + requested} ({prompt_len} in the messages, {requested} in the "
                                f"completion): max_tokens may be at most {room}", "max_tokens")
    return requested, None


def build_app(local, served_name: str, *, default_max_tokens: int = DEFAULT_MAX_TOKENS,
              max_model_len: Optional[int] = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              request_timeout: float = DEFAULT_REQUEST_TIMEOUT, stopping: Optional[threading.Event] = None):
    """The FastAPI app serving `local` (an arena.evaluation.local_model.LocalModel). Setting
    `stopping` (app.state.stopping) abandons decodes in flight: the server is shutting down."""
    import torch
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError

    # lazy: keeps tokenizers, torch, transformers out of this module's import
    from arena.lm.sampler import DecodeStopped

    app = FastAPI(title="arena serve")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.state.stopping = stopping = stopping or threading.Event()
    created = int(time.time())
    device = next(local.model.parameters()).device
    context = int(max_model_len or local.context or 1 << 62)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request, exc: RequestValidationError):
        """pydantic's findings as an OpenAI 400: every field named, the first one as `param`."""
        fields = [".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body" for e in exc.errors()]
        message = "; ".join(f"{f}: {e.get('msg')}" for f, e in zip(fields, exc.errors()))
        return error(400, message or "invalid request", fields[0] if fields else None)

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": served_name, "object": "model", "created": created,
                                            "owned_by": "arena", "max_model_len": context}]}

    @app.post("/v1/chat/completions")
    def chat_completions(req: ChatRequest):  # sync: FastAPI runs it in its thread pool
        deadline = time.monotonic() + request_timeout
        if req.stream:
            return error(400, "stream=true is not supported by arena serve", "stream")
        if req.n != 1:
            return error(400, f"n={req.n}: only n=1 is supported by arena serve", "n")
        messages = [m.model_dump() for m in req.messages]
        prompt_ids = local.encode(messages)
        if not prompt_ids:
            return error(400, "the messages encode to an empty prompt", "messages")
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        max_tokens, refused = token_budget(requested, len(prompt_ids), context, default_max_tokens)
        if refused is not None:
            return refused
        generator = None
        if req.seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(req.seed)
        temperature = 1.0 if req.temperature is None else req.temperature
        try:
            text, tokens, _, finish = local.complete(
                [prompt_ids], temperature=temperature, top_p=1.0 if req.top_p is None else req.top_p,
                max_new_tokens=max_tokens, generator=generator, lock_timeout=max(0.0, deadline - time.monotonic()),
                should_stop=lambda: stopping.is_set() or time.monotonic() > deadline)[0]
        except (DecodeStopped, TimeoutError):
            if stopping.is_set():
                return error(503, "the server is shutting down; the decode was abandoned")
            return error(504, f"the request took longer than {request_timeout:g} s (server option request_timeout)")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": served_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(tokens),
                      "total_tokens": len(prompt_ids) + len(tokens)},
        }

    return app


def make_server(app, *, host: str, port: int, grace_s: float = SHUTDOWN_GRACE_S, **config):
    """A uvicorn server for `app` whose SIGTERM/SIGINT handler first sets app.state.stopping, so
    a decode in flight stops before its next token instead of holding the shutdown."""
    import uvicorn

    class StoppableServer(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            app.state.stopping.set()
            super().handle_exit(sig, frame)

    return StoppableServer(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                          timeout_graceful_shutdown=grace_s, **config))


def _positive(o: dict, key: str, kind: type) -> None:
    value = o[key]
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
    if value is not None and not (ok and math.isfinite(value) and value > 0):
        # lazy: keeps omegaconf out of this module's import
        from .options import BadEvalInput

        raise BadEvalInput(f"{key}={value!r}: expected {'a finite number' if kind is float else 'an integer'} > 0")


def serve_folder(o: dict) -> Path:
    """The model folder model.path names: itself, or a run folder's final policy (options.checkpoint_dir)."""
    # lazy: keeps omegaconf out of this module's import
    from .options import checkpoint_dir

    return checkpoint_dir(str(o["model.path"]))


def check_serve_args(args: dict) -> dict:
    """The serve keys with defaults filled in; BadEvalInput names a bad one and its valid values."""
    # lazy: keeps omegaconf out of this module's import
    from arena.config.args import unknown_key_message

    # lazy: keeps omegaconf out of this module's import
    from .options import SERVE_DEFAULTS, SERVE_DEVICES, BadEvalInput

    unknown = sorted(set(args) - set(SERVE_DEFAULTS))
    if unknown:
        raise BadEvalInput(unknown_key_message(unknown[0], SERVE_DEFAULTS))
    if args.get("device", "cpu") not in SERVE_DEVICES:
        raise BadEvalInput(f"unknown device {args['device']!r}; valid: {', '.join(SERVE_DEVICES)}")
    o = {**SERVE_DEFAULTS, **args}
    if not o["model.path"] or not serve_folder(o).is_dir():
        raise BadEvalInput(f"model.path={o['model.path']!r}: expected a checkpoint folder (a model, or a run folder "
                           "with a policy)")
    port = o["port"]
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise BadEvalInput(f"port={port!r}: expected an integer in 0..65535")
    for key, kind in (("max_tokens", int), ("max_model_len", int), ("max_body_bytes", int), ("request_timeout", float)):
        _positive(o, key, kind)
    return o


def serve_main(args: dict, log=print) -> int:
    """`arena serve` (module docstring). Returns 2 on bad input, after printing why."""
    # lazy: keeps omegaconf out of this module's import
    from .options import BadEvalInput

    try:
        o = check_serve_args(args)
    except BadEvalInput as exc:
        print(f"arena serve: {exc}", file=sys.stderr)
        return 2
    from .local_model import LocalModel  # lazy: torch and transformers, only once the input is valid

    path = serve_folder(o).resolve()
    local = LocalModel(str(path), device=str(o["device"]))
    if o["max_model_len"] and local.context and o["max_model_len"] > local.context:
        print(f"arena serve: max_model_len={o['max_model_len']} exceeds the model's context ({local.context} "
              f"positions); valid: 1..{local.context}", file=sys.stderr)
        return 2
    name = str(o["served_name"] or Path(str(o["model.path"])).resolve().name)
    app = build_app(local, name, default_max_tokens=o["max_tokens"] or DEFAULT_MAX_TOKENS,
                    max_model_len=o["max_model_len"], max_body_bytes=o["max_body_bytes"] or DEFAULT_MAX_BODY_BYTES,
                    request_timeout=float(o["request_timeout"] or DEFAULT_REQUEST_TIMEOUT))
    log(f"[serve] {name} ({path}) on http://{o['host']}:{o['port']}/v1")
    make_server(app, host=str(o["host"]), port=o["port"]).run()
    return 0
