"""`arena serve model.path=DIR [port=8000] [host=127.0.0.1] [served_name=NAME] [max_tokens=N]`: an
OpenAI-compatible chat-completions server for any arena or local HF checkpoint (docs/eval.md,
arena serve), so that trained policies and API models are driven by the same client.

Endpoints: `GET /v1/models`, `POST /v1/chat/completions` (non-streaming, n=1). The request's
`temperature` (default 1.0, as OpenAI's), `top_p`, `max_tokens` (or `max_completion_tokens`)
and `seed` are honoured; temperature 0 is greedy. A completion ends at `</action>`, which stays
in the text (as in training), at eos, or after max_tokens (finish_reason "length"). Requests
are served one at a time (one model, one lock). There is no authentication: bind to 127.0.0.1
(the default) unless the network is trusted.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

DEFAULT_MAX_TOKENS = 256


def build_app(local, served_name: str, *, default_max_tokens: int = DEFAULT_MAX_TOKENS):
    """The FastAPI app serving `local` (an arena.evaluation.local_model.LocalModel)."""
    import torch
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI(title="arena serve")
    created = int(time.time())
    device = next(local.model.parameters()).device

    def error(status: int, message: str, param: Optional[str] = None) -> JSONResponse:
        return JSONResponse(status_code=status, content={
            "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}})

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": served_name, "object": "model", "created": created, "owned_by": "arena"}]}

    @app.post("/v1/chat/completions")
    def chat_completions(body: dict[str, Any]):  # sync: FastAPI runs it in its thread pool
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return error(400, "messages must be a non-empty list of {role, content} objects", "messages")
        if body.get("stream"):
            return error(400, "stream=true is not supported by arena serve", "stream")
        if int(body.get("n") or 1) != 1:
            return error(400, "only n=1 is supported", "n")
        try:
            temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
            top_p = float(body.get("top_p") or 1.0)
            max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens)
        except (TypeError, ValueError) as exc:
            return error(400, f"bad sampling parameter: {exc}")
        if temperature < 0 or not 0 < top_p <= 1 or max_tokens < 1:
            return error(400, "need temperature >= 0, 0 < top_p <= 1, max_tokens >= 1")
        generator = None
        if body.get("seed") is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(int(body["seed"]))
        prompt_ids = local.encode(messages)
        if not prompt_ids:
            return error(400, "the messages encode to an empty prompt", "messages")
        text, tokens, _, finish = local.complete([prompt_ids], temperature=temperature, top_p=top_p,
                                                 max_new_tokens=max_tokens, generator=generator)[0]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": served_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(tokens),
                      "total_tokens": len(prompt_ids) + len(tokens)},
        }

    return app


def serve_main(args: dict, log=print) -> int:
    """`arena serve` (module docstring). Returns 2 on bad input, after printing why."""
    from arena.config.args import unknown_key_message

    from .options import SERVE_DEFAULTS, SERVE_DEVICES, BadEvalInput, checkpoint_dir

    try:
        unknown = sorted(set(args) - set(SERVE_DEFAULTS))
        if unknown:
            raise BadEvalInput(unknown_key_message(unknown[0], SERVE_DEFAULTS))
        if args.get("device", "cpu") not in SERVE_DEVICES:
            raise BadEvalInput(f"unknown device {args['device']!r}; valid: {', '.join(SERVE_DEVICES)}")
        o = {**SERVE_DEFAULTS, **args}
        model_dir = checkpoint_dir(str(o["model.path"])) if o["model.path"] else None  # a run folder -> its policy
        if model_dir is None or not model_dir.is_dir():
            raise BadEvalInput(f"model.path={o['model.path']!r}: expected a checkpoint folder")
        port = o["port"]
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise BadEvalInput(f"port={port!r}: expected an integer in 0..65535")
        if o["max_tokens"] is not None and (not isinstance(o["max_tokens"], int) or o["max_tokens"] < 1):
            raise BadEvalInput(f"max_tokens={o['max_tokens']!r}: expected an integer >= 1")
    except BadEvalInput as exc:
        print(f"arena serve: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from .local_model import LocalModel  # torch and transformers: only once the input is valid

    path = model_dir.resolve()
    local = LocalModel(str(path), device=str(o["device"]))
    name = str(o["served_name"] or Path(str(o["model.path"])).resolve().name)
    app = build_app(local, name, default_max_tokens=o["max_tokens"] or DEFAULT_MAX_TOKENS)
    log(f"[serve] {name} ({path}) on http://{o['host']}:{port}/v1")
    uvicorn.run(app, host=str(o["host"]), port=port, log_level="warning")
    return 0
