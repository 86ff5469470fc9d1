"""The "before" of benchmarks/bench_eval.py and bench_sampler.py: the sampler and eval as they were
before the eval speed work. Everything that work left alone (token choice, the stop rule, the
generic decoder, the bodies of sample_tokens, make_policy and evaluate) is today's arena.lm code,
run here with the things the work changed put back, so the reference cannot drift from today's
code in anything else:
- `sample_tokens` and `evaluate` run under torch.no_grad (today: torch.inference_mode);
- make_policy's `generate` encodes and decodes one prompt at a time (today: one batched
  tokenizer call each way, the encoding through the fast backend's own batch call,
  arena.lm.tokenizer.encode_texts and decode_rows): it is handed `OnePromptAtATime(tokenizer)`, and
  this module's `encode_texts` and `decode_rows` call it as transformers' tokenizer is called (the
  stop rule, StopStrings, is today's, which decodes its tails through the fast backend too);
- the prefill runs the last layer at every prompt position (today: its query, attention and MLP
  at the last one only, `make_decoder(..., trim_prefill=True)`): this module's `make_decoder`;
- the decoder runs the model's own modules layer by layer (today: its weights packed,
  arena/lm/packed_layers.py): benchmarks/reference_decoder.py keeps that decoder as it was;
- the model's linear layers are torch's, MKL's sgemm on the CPU (today: oneDNN's,
  arena/lm/linear_kernel.py): this module's `make_decoder` runs a twin of the model (the same
  weight tensors, `torch_linear_twin`) switched to them;
- the decoder runs on the calling thread at torch's thread count (today: with several torch threads
  on the CPU, the prefill's chunks and each decode step's row blocks on worker threads of one torch
  thread each, arena/lm/micro_threads.py): this module's `make_decoder` gives `worker_threads = 1`;
- the prompts are padded one tensor per prompt (today: one tensor from padded lists): this module's
  `left_pad`;
- a TextWorld game (household) restarts at every reset, TextWorld's own reset (today: its start
  state is set back, arena/envs/textworld_reset.py): `evaluate` runs inside `full_resets()`.
`sample_tokens` (with its loop `_decode`), `make_policy` and `evaluate` are today's functions' code bound to this module's
names (`rebound`): evaluate calls this module's make_policy (the one bench_eval's timed_eval swaps
for a recording one), make_policy calls this module's sample_tokens, encode_prompts (encode_texts) and decode_rows, and sample_tokens
this module's make_decoder.
The benchmarks run both paths in one process, on the same model and seeds, and check that they
give the same tokens and wins, log-probs within float rounding (tests/lm/test_sampler_reference.py
does too).
"""
from __future__ import annotations

import copy
import types
import weakref

import torch

import arena.lm.evaluate as today_eval
import arena.lm.sampler as today_sampler
from arena.agent.rollout import rollout  # noqa: F401  (read by the rebound evaluate)
from arena.config import to_plain  # noqa: F401  (read by the rebound evaluate)
from arena.envs.textworld_reset import full_resets
from arena.envs import eval_seed  # noqa: F401  (read by the rebound evaluate)
from arena.lm.evaluate import _ENV_CACHE, _eval_envs  # noqa: F401  (one env cache for both paths)
from arena.lm.decoding import HFCacheDecoder, runs_layer_by_layer
from arena.lm.linear_kernel import set_linear_kernel
from arena.lm.micro_threads import own_ops_on_one_thread  # noqa: F401  (read by the rebound sample_tokens)
from arena.lm.sampler import DecodeStopped, choose_tokens  # noqa: F401  (read by the rebound sample_tokens)
from arena.lm.sampler import StopStrings as TodayStopStrings

from reference_decoder import StaticCacheDecoder  # noqa: E402  (benchmarks/ is not a package)


def rebound(function):
    """`function`'s undecorated code with this module's globals (its defaults kept)."""
    inner = getattr(function, "__wrapped__", function)
    out = types.FunctionType(inner.__code__, globals(), inner.__name__, inner.__defaults__, inner.__closure__)
    out.__kwdefaults__, out.__doc__ = inner.__kwdefaults__, inner.__doc__
    return out


class OnePromptAtATime:
    """A tokenizer whose batched calls run one text at a time, as `generate` did before:
    tok(texts)["input_ids"] = [tok.encode(t) for t in texts],
    tok.batch_decode(rows) = [tok.decode(r) for r in rows]. Everything else is the tokenizer's."""

    _made: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def of(cls, tokenizer) -> "OnePromptAtATime":
        """One wrapper per tokenizer, so that nothing keyed by the tokenizer is rebuilt per eval."""
        if tokenizer not in cls._made:
            cls._made[tokenizer] = cls(tokenizer)
        return cls._made[tokenizer]

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)

    def __len__(self) -> int:
        return len(self.tokenizer)

    def __call__(self, texts, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [self.encode(t, add_special_tokens=add_special_tokens) for t in texts]}

    def batch_decode(self, rows, skip_special_tokens: bool = False) -> list:
        return [self.decode(r, skip_special_tokens=skip_special_tokens) for r in rows]


def encode_texts(tokenizer, texts) -> list:
    """The prompts' ids as make_policy got them before: the tokenizer's own call (today:
    arena.lm.tokenizer.encode_texts, the fast backend's batch call), here on OnePromptAtATime."""
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"]


def encode_prompts(tokenizer, prompts) -> list:
    """make_policy's prompt ids (arena.lm.tokenizer.encode_prompts) for a tokenizer without a chat
    template, as every benchmark's is (arena's own): this module's encode_texts."""
    assert not getattr(tokenizer, "chat_template", None), "the benchmarks run arena's own tokenizers, which have no chat template"
    return encode_texts(tokenizer, prompts)


def decode_rows(tokenizer, rows, *, skip_special_tokens: bool = True) -> list:
    """The responses' texts as make_policy got them before: the tokenizer's own batch_decode (today:
    arena.lm.tokenizer.decode_rows, the fast backend's batch call), here on OnePromptAtATime."""
    return tokenizer.batch_decode(rows, skip_special_tokens=skip_special_tokens)


def left_pad(prompts, pad_token_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, P], mask [B, P]) right-aligned, as the sampler built them before: one tensor per
    prompt, then torch's pad_sequence (today: one tensor from the padded lists)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("sample_tokens needs a non-empty list of non-empty prompts")
    rows = [torch.as_tensor(list(p), dtype=torch.long) for p in prompts]
    ones = [torch.ones(len(p), dtype=torch.long) for p in prompts]
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_token_id, padding_side="left")
    mask = torch.nn.utils.rnn.pad_sequence(ones, batch_first=True, padding_value=0, padding_side="left")
    return ids.to(device), mask.to(device)  # [B, P] each


def StopStrings(tokenizer, stops):  # noqa: N802  (the name make_policy's code calls)
    """Today's stop rule on the real tokenizer (the stop rule was not part of the speed work)."""
    return TodayStopStrings(getattr(tokenizer, "tokenizer", tokenizer), stops)


_TWINS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def torch_linear_twin(model):
    """A copy of `model`'s modules whose linear layers are torch's, sharing its parameters and
    buffers (so it follows every update of the model), made once per model."""
    if model not in _TWINS:
        shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
        _TWINS[model] = set_linear_kernel(copy.deepcopy(model, shared), "torch")
    return _TWINS[model]


def make_decoder(model, batch: int, max_len: int):
    """The decoder before the packing (reference_decoder.py) on the model's torch-linear twin, with the
    prefill's last layer at every position; today's generic decoder for other architectures."""
    twin = torch_linear_twin(model)
    if runs_layer_by_layer(twin):
        decoder = StaticCacheDecoder(twin, batch, max_len, trim_prefill=False)
        decoder.worker_threads = 1  # on the calling thread (sample_tokens reads it)
        return decoder
    return HFCacheDecoder(twin)


sample_tokens = torch.no_grad()(rebound(today_sampler.sample_tokens))
_decode = rebound(today_sampler._decode)
_make_policy_code = rebound(today_sampler.make_policy)


def make_policy(model, tokenizer, **kwargs):
    """Today's make_policy with this module's sample_tokens, tokenizing one prompt at a time."""
    return _make_policy_code(model, OnePromptAtATime.of(tokenizer), **kwargs)


_evaluate_code = torch.no_grad()(rebound(today_eval.evaluate))


def evaluate(*args, **kwargs):
    """Today's evaluate (rebound) with TextWorld's full reset of every game."""
    with full_resets():
        return _evaluate_code(*args, **kwargs)
