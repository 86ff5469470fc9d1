"""ArenaAgentLoop through verl's real AgentLoopWorker and verl's real LLMServerClient, against a
fake vLLM server that keeps the contract of verl's `vLLMHttpServer.generate`
(verl/workers/rollout/vllm_rollout/vllm_async_server.py, read for 0.9.1):

- it pops `max_tokens` from the sampling params (a key left in would reach vLLM's
  SamplingParams twice), maps `logprobs` (True -> 0: the sampled token's log-prob only), sets
  `repetition_penalty` / `ignore_eos` defaults, and builds SamplingParams from the rest, so a key
  SamplingParams does not take raises TypeError, as vLLM would;
- its engine does not stop exactly at the stop string: a token may run past it (here the text
  runs on to " then more"), and the ids come back as sampled;
- it returns processed log-probs, `[logprobs[token_ids[i]].logprob for i ...]`, one per token.

No vLLM, no Ray, no GPU: the load balancer is a stand-in with Ray's `.remote` call shape.
The corridor episode and the worker are test_agent_loop's."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")

from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from tests.verl.real_tokenizer import STOP, build_real_tokenizer  # noqa: E402
from tests.verl.test_agent_loop import RESPONSE_LEN, RIGHT, _generate_corridor, _worker  # noqa: E402

# vllm.SamplingParams' keyword arguments (vLLM 0.19-0.24), the ones the contract may pass on
SAMPLING_PARAMS = {"n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
                   "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens",
                   "logprobs", "prompt_logprobs", "detokenize", "skip_special_tokens",
                   "spaces_between_special_tokens", "include_stop_str_in_output", "logit_bias",
                   "allowed_token_ids", "extra_args", "bad_words", "structured_outputs"}


class FakeVLLMServer:
    """vLLMHttpServer.generate's handling of a request, with a scripted engine (module docstring)."""

    def __init__(self, tokenizer, text: str):
        self.ids = tokenizer.encode(text, add_special_tokens=False)  # the engine's sample, past the stop
        self.requests = []

    async def generate(self, prompt_ids, sampling_params, request_id, image_data=None, video_data=None, **kw):
        params = dict(sampling_params)
        max_tokens = params.pop("max_tokens")
        params["logprobs"] = 0 if params.pop("logprobs", False) else None
        params.setdefault("repetition_penalty", 1.0)
        params.setdefault("ignore_eos", False)
        unknown = set(params) - SAMPLING_PARAMS
        if unknown:
            raise TypeError(f"SamplingParams got unexpected keyword arguments {sorted(unknown)}")
        self.requests.append({"request_id": request_id, "max_tokens": max_tokens, **params})
        token_ids = self.ids[:max_tokens]
        # vLLM's per-token {token id: Logprob}; token i has log-prob -(i + 1) / 4 (exact in float32)
        logprobs = [{tid: SimpleNamespace(logprob=-(i + 1) / 4)} for i, tid in enumerate(token_ids)]
        log_probs = None
        if params["logprobs"] is not None:
            log_probs = [logprobs[i][token_ids[i]].logprob for i in range(len(token_ids))]
        await asyncio.sleep(0)
        return TokenOutput(token_ids=token_ids, log_probs=log_probs, stop_reason="completed",
                           extra_fields={"global_steps": 0})


def _remote(fn):
    """Ray's call shape: `actor.method.remote(...)` returns an awaitable (or is dropped)."""
    async def call(*args, **kwargs):
        return await fn(*args, **kwargs) if asyncio.iscoroutinefunction(fn) else fn(*args, **kwargs)

    return SimpleNamespace(remote=lambda *a, **k: asyncio.ensure_future(call(*a, **k)))


class FakeBalancer:
    """verl's global load balancer actor, one server: records each acquire's sticky request id."""

    def __init__(self, server):
        handle = SimpleNamespace(generate=_remote(server.generate))
        self.acquired = []
        self.require_acquire_fields = _remote(lambda: [])
        self.require_release_fields = _remote(lambda: ["request_id"])
        self.acquire_server = _remote(lambda request_id, **_: (self.acquired.append(request_id), ("s0", handle))[1])
        self.release_server = _remote(lambda server_id, **_: None)


def test_the_agent_loop_keeps_the_vllm_server_contract(tmp_path):
    tok = build_real_tokenizer(tmp_path)  # "</action>" is several BPE tokens
    server = FakeVLLMServer(tok, RIGHT + " then more")
    worker = _worker(tok, None)
    worker.config.actor_rollout_ref.rollout.name = "vllm"
    balancer = FakeBalancer(server)
    worker.llm_client = LLMServerClient(worker.config, load_balancer_handle=balancer)
    out = _generate_corridor(worker, seed=3, rows=1)

    (request,) = server.requests  # "right" solves the corridor: one turn, one request
    assert request["max_tokens"] == RESPONSE_LEN  # popped: the loop's per-turn limit
    assert request["logprobs"] == 0 and request["stop"] == [STOP]  # log-probs asked; the stop sent
    (turn,) = out.non_tensor_batch["arena_turns"][0]
    n = len(tok.encode(RIGHT, add_special_tokens=False))
    assert n < len(server.ids)  # the engine ran past the stop
    # cut after the token that completes "</action>"; the processed log-probs of those tokens
    assert turn["response_ids"] == server.ids[:n] and turn["text"] == RIGHT
    assert turn["logp"] == [-(i + 1) / 4 for i in range(n)]
    assert turn["action_valid"] and out.non_tensor_batch["arena_episode"][0]["won"]
    assert len(balancer.acquired) == 1 and request["request_id"] != balancer.acquired[0]  # a fresh vLLM id a turn
