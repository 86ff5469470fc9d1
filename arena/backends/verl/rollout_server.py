"""The server of verl's "arena" rollout: arena's KV-cache sampler behind verl's server interface.

verl's agent loop asks a rollout server, one request per LLM call,
    `await server.generate(request_id=..., prompt_ids=[...], sampling_params={...}) -> TokenOutput`
(verl/workers/rollout/llm_server.py); the trainer pushes the actor's weights to it after every
update (the worker-side `arena_rollout.ArenaServerAdapter.update_weights`, hybrid mode).

`ArenaGenerator` is the model part, with no Ray and no asyncio: a local HF causal LM (the
actor's checkpoint, loaded in float32) and its tokenizer; `generate_batch` runs one
`sample_tokens` call for many requests that share their sampling parameters, and
`load_weights` copies verl's `(name, tensor)` pairs into the model (HF names, as the FSDP
engine's `get_per_tensor_param` yields them; a name the model does not have is an error).

`ArenaRolloutServer` is the Ray actor (created by `arena_rollout.ArenaReplica`): requests that
arrive within `BATCH_WAIT_S` of each other are sampled together (the episodes of a step call
the server at nearly the same time, one turn each), grouped by sampling parameters; one batch
runs at a time, in a thread, so the event loop keeps accepting requests; `update_weights` waits
for the running batch and blocks the next one. The remaining server methods verl calls
(`wake_up`, `sleep`, `clear_kv_cache`, ...) have nothing to do here: the KV cache lives only
inside one `sample_tokens` call, and the weights stay in memory between steps.

Sampling parameters (verl's agent loop sends `temperature`, `top_p`, `top_k`,
`repetition_penalty`, `logprobs`; arena's agent loop adds `max_tokens` and `stop`):
- `temperature`, `top_p`, `max_tokens`: as `sample_tokens` (T = 0 is greedy);
- `stop`: stop strings, matched on the decoded text (`StopStrings`); eos always stops unless
  `ignore_eos`;
- `logprobs`: truthy -> `TokenOutput.log_probs` = the sampler's log-probs, log_softmax(z / T)
  at the drawn token (arena/lm/sampler.py);
- `top_k` must be -1/0/None and `repetition_penalty` 1: anything else is refused (ValueError),
  never silently ignored.
Sampling is seeded: the server's generator starts from `seed` (verl's `rollout.seed`).
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, Optional

import torch

from arena.lm.sampler import StopStrings, sample_tokens

BATCH_WAIT_S = 0.02  # how long the first request of a batch waits for others
UNSUPPORTED = {"top_k": (-1, 0, None), "repetition_penalty": (1, 1.0, None)}


def batch_key(sampling_params: dict, default_max_tokens: int) -> tuple:
    """The parameters that must be equal inside one `sample_tokens` call (ValueError on an
    unsupported one, naming the valid values)."""
    for name, valid in UNSUPPORTED.items():
        if sampling_params.get(name) not in valid:
            raise ValueError(f"arena rollout: {name}={sampling_params.get(name)!r} is not supported; valid: {valid}")
    return (
        float(sampling_params.get("temperature", 1.0)),
        float(sampling_params.get("top_p", 1.0)),
        int(sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens") or default_max_tokens),
        tuple(sampling_params.get("stop") or ()),
        bool(sampling_params.get("ignore_eos", False)),
        bool(sampling_params.get("logprobs")),
    )


class ArenaGenerator:
    """A causal LM and its tokenizer; `generate_batch` samples with arena's KV-cache sampler."""

    def __init__(self, model, tokenizer, *, seed: int = 0, default_max_tokens: int = 64):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.default_max_tokens = int(default_max_tokens)
        device = next(model.parameters()).device
        self.generator = torch.Generator(device=device).manual_seed(int(seed))
        self.global_steps: Optional[int] = None

    @classmethod
    def from_pretrained(cls, path: str, *, tokenizer_path: Optional[str] = None, device: str = "cpu", **kwargs):
        """The checkpoint at `path` in float32 with eager attention, on `device`."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or path)
        return cls(model.to(device), tokenizer, **kwargs)

    @torch.no_grad()
    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy (name, tensor) pairs into the model's parameters and buffers (cast to their
        dtype and device); returns how many were copied. Unknown names raise a KeyError."""
        own = dict(self.model.named_parameters())
        own.update(dict(self.model.named_buffers()))
        count = 0
        for name, tensor in named_tensors:
            if name not in own:
                if name == "lm_head.weight" and getattr(self.model.config, "tie_word_embeddings", False):
                    continue  # tied: the embedding's copy is the same tensor
                raise KeyError(f"arena rollout: weight {name!r} is not in the model; e.g. {sorted(own)[:5]}")
            own[name].copy_(tensor)
            count += 1
        return count

    def generate_batch(self, key: tuple, prompts: list[list[int]]) -> list[dict]:
        """One `sample_tokens` call for `prompts` under the parameters `key` (`batch_key`);
        returns per prompt the fields of verl's TokenOutput."""
        temperature, top_p, max_tokens, stop, ignore_eos, want_logprobs = key
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (eos or 0)
        outputs = sample_tokens(
            self.model, prompts, temperature=temperature, top_p=top_p, max_new_tokens=max_tokens,
            stop_token_ids=[] if ignore_eos or eos is None else [eos], pad_token_id=pad, generator=self.generator,
            stop_strings=StopStrings(self.tokenizer, stop) if stop else None,
        )
        return [{"token_ids": ids, "log_probs": logp if want_logprobs else None, "stop_reason": "completed",
                 "extra_fields": {"global_steps": self.global_steps}} for ids, logp in outputs]


class ArenaRolloutServer:
    """verl's rollout-server interface over an `ArenaGenerator` (module docstring)."""

    def __init__(self, generator: Optional[ArenaGenerator] = None, *, config=None, model_config=None,
                 device: str = "cpu", batch_wait_s: float = BATCH_WAIT_S):
        """Over `generator`, or (in a Ray actor) one built from verl's configs (`from_verl`)."""
        if generator is None:
            generator = self.generator_from_verl(config, model_config, device=device)
        self.generator = generator
        self.batch_wait_s = batch_wait_s
        self.pending: list[tuple[tuple, list[int], asyncio.Future]] = []
        self.model_lock: Optional[asyncio.Lock] = None  # created on the actor's event loop
        self.draining = False
        self.batches = 0  # sample_tokens calls so far (for tests and logs)

    @staticmethod
    def generator_from_verl(config, model_config, *, device: str = "cpu") -> ArenaGenerator:
        """From verl's RolloutConfig and model config (HFModelConfig or its DictConfig)."""
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import HFModelConfig

        if not isinstance(model_config, HFModelConfig):
            model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        return ArenaGenerator.from_pretrained(
            model_config.local_path, tokenizer_path=model_config.local_tokenizer_path, device=device,
            seed=int(getattr(config, "seed", 0) or 0), default_max_tokens=int(config.response_length))

    def _lock(self) -> asyncio.Lock:
        if self.model_lock is None:
            self.model_lock = asyncio.Lock()
        return self.model_lock

    async def generate(self, request_id: str = "", *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data=None, video_data=None, **kwargs):
        """One request; batched with the requests that arrive within `batch_wait_s`."""
        from verl.workers.rollout.replica import TokenOutput

        if image_data is not None or video_data is not None:
            raise ValueError("arena rollout: text only (image_data / video_data are not supported)")
        key = batch_key(sampling_params, self.generator.default_max_tokens)
        future = asyncio.get_running_loop().create_future()
        self.pending.append((key, list(prompt_ids), future))
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return TokenOutput(**(await future))

    async def _drain(self) -> None:
        """Run the pending requests, one parameter group per `sample_tokens` call, until none
        are left; the first waits `batch_wait_s` for the rest of its turn to arrive."""
        try:
            await asyncio.sleep(self.batch_wait_s)
            while self.pending:
                batch, self.pending = self.pending, []
                groups: dict[tuple, list] = {}
                for key, prompt, future in batch:
                    groups.setdefault(key, []).append((prompt, future))
                for key, items in groups.items():
                    async with self._lock():
                        try:
                            results = await asyncio.to_thread(self.generator.generate_batch, key,
                                                              [p for p, _ in items])
                        except Exception as exc:  # noqa: BLE001 - every waiting request gets the error
                            for _, future in items:
                                future.set_exception(exc)
                            continue
                    self.batches += 1
                    for (_, future), result in zip(items, results):
                        future.set_result(result)
        finally:
            self.draining = False

    async def update_weights(self, named_tensors: dict, global_steps: Optional[int] = None) -> int:
        """Load the actor's weights (after the running batch; before the next)."""
        async with self._lock():
            count = await asyncio.to_thread(self.generator.load_weights, named_tensors.items())
        if global_steps is not None:
            self.generator.global_steps = int(global_steps)
        return count

    async def set_global_steps(self, global_steps: int) -> None:
        self.generator.global_steps = int(global_steps)

    async def ready(self) -> bool:
        return True

    # verl's control methods: nothing to free or restore (module docstring)
    async def wake_up(self, tags=None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        return None

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None
