"""Batched sampling with a KV cache, and the rollout loop's policy adapter.

`sample_tokens` takes variable-length prompts (lists of token ids), left-pads them, prefills
once (each distinct prompt once) and then decodes one token per step for the whole batch. A
row stops at a stop token id (eos), at the first token after which its decoded response
contains a stop string (`</action>`: `StopStrings`), or after `max_new_tokens`; the token that
ends it is kept in its output. Finished rows leave the batch (their cache rows are dropped),
so they cost nothing afterwards.

Stop strings are matched on text, not on token ids: a real tokenizer (Qwen3's, any byte-level
BPE without `</action>` as an added token) spells `</action>` with several tokens, and may
spell it differently depending on what precedes it. The response ends at the token that
completes the stop string; the ids are returned as sampled (never re-tokenised), so the
per-turn rows stay exact. When that token also carries characters after the stop (a merged
piece such as ">" plus a newline), they stay in the response: ids and text always agree.

Log-probs returned (the choice documented by the issue): the log-prob of the chosen token
under the temperature-scaled distribution WITHOUT top-p truncation,
    logp_t = log_softmax(logits_t / T)[token_t],
so at T = 1 they are the model's own log-probs and they match a full forward pass of the same
tokens (`logprobs.token_logprobs_and_entropy` with the same T). Top-p only decides which
tokens may be drawn. Greedy decoding (T = 0) returns the model's T = 1 log-probs.
"""
from __future__ import annotations

import weakref
from typing import Callable, Optional, Sequence

import torch

from .decoding import make_decoder
from .micro_threads import own_ops_on_one_thread
from .tokenizer import decode_rows, encode_prompts

Policy = Callable[[list], list]


class DecodeStopped(RuntimeError):
    """sample_tokens was told to stop (its `should_stop`) before it finished."""


def left_pad(prompts: Sequence[Sequence[int]], pad_token_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, P], mask [B, P]) with each prompt right-aligned; mask is 1 on real tokens."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("sample_tokens needs a non-empty list of non-empty prompts")
    lengths = [len(p) for p in prompts]
    width = max(lengths)
    # one tensor from the padded lists (not one tensor per prompt, then a padding pass)
    ids = torch.tensor([[pad_token_id] * (width - n) + list(p) for n, p in zip(lengths, prompts)], dtype=torch.long)  # [B, P]
    starts = width - torch.tensor(lengths, dtype=torch.long)  # [B]: first real column of each row
    mask = (torch.arange(width) >= starts[:, None]).long()  # [B, P]
    return ids.to(device), mask.to(device)  # [B, P] each


def top_p_filter(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filter on log-probs [B, V]: keep the smallest set of most likely tokens whose
    mass reaches top_p; the rest get -inf. Token i (in descending order) is dropped iff the
    mass strictly before it, cumsum_i - p_i, is already >= top_p (so the top token is kept)."""
    if top_p >= 1.0:
        return logp
    sorted_logp, order = logp.sort(dim=-1, descending=True)  # [B, V] each
    probs = sorted_logp.exp()  # [B, V]
    mass_before = probs.cumsum(dim=-1) - probs  # [B, V]
    drop_sorted = mass_before >= top_p  # [B, V]
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # [B, V]
    return logp.masked_fill(drop, float("-inf"))  # [B, V]


def draw_from(probs: torch.Tensor, generator) -> torch.Tensor:
    """One draw per row of probs [B, V] by inverting the CDF: token = min{i : cdf_i > u * cdf_V}
    with u ~ U[0, 1). Tokens of probability 0 have no interval, so they are never drawn.
    (One uniform per row; torch.multinomial draws V exponentials per row, ~10x slower here.)"""
    cdf = probs.cumsum(dim=-1)  # [B, V]
    u = torch.rand(probs.shape[0], 1, generator=generator, device=probs.device, dtype=cdf.dtype)  # [B, 1]
    tokens = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]  # [B]
    return tokens.clamp(max=probs.shape[1] - 1)  # [B]


def choose_tokens(logits: torch.Tensor, *, temperature: float, top_p: float, generator) -> tuple:
    """Sample one token per row from logits [B, V]; return (tokens [B], logp [B]) where
    logp = log_softmax(logits / T)[token] (T = 1 when greedy)."""
    if temperature == 0:
        logp = torch.log_softmax(logits.float(), dim=-1)  # [B, V]
        tokens = logp.argmax(dim=-1)  # [B]
    else:
        scaled = logits.float() if temperature == 1 else logits.float() / temperature  # [B, V] (x / 1 = x exactly)
        logp = torch.log_softmax(scaled, dim=-1)  # [B, V]
        tokens = draw_from(top_p_filter(logp, top_p).exp(), generator)  # [B]
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]  # [B], [B]


class StopStrings:
    """The text stop rule: row b stops at step t iff one of `stops` occurs in
    decode(response_b[: t + 1]) and not in decode(response_b[: t]).

    Checked every step on the last `window` tokens only: an occurrence that ends in token t
    spans at most L = len(stop in UTF-8 bytes) bytes and every token decodes to >= 1 byte, so it
    lies inside the last L + 1 tokens; an earlier occurrence would have stopped the row earlier.
    Only rows whose last token can end a stop (`candidates`: its own text contains the stop's
    last character, or is an incomplete UTF-8 piece) are decoded, so a step usually costs one
    gather. Special tokens are skipped when decoding, as in the response text."""

    _candidate_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def __init__(self, tokenizer, stops: Sequence[str]):
        self.tokenizer = tokenizer
        self.stops = tuple(s for s in stops if s)
        if not self.stops:
            raise ValueError("StopStrings needs at least one non-empty stop string")
        self.window = max(len(s.encode("utf-8")) for s in self.stops) + 1
        self.candidates = self._candidates()  # [V_tok] bool

    def _candidates(self) -> torch.Tensor:
        """candidates[v] = token v alone decodes to text containing a stop's last character
        (or to U+FFFD: part of a multi-byte character). Cached per tokenizer and stop set."""
        per_tokenizer = self._candidate_cache.setdefault(self.tokenizer, {})
        key = (self.stops, len(self.tokenizer))
        if key not in per_tokenizer:
            pieces = self.tokenizer.batch_decode([[v] for v in range(len(self.tokenizer))], skip_special_tokens=True)
            last_chars = {s[-1] for s in self.stops} | {"\ufffd"}
            per_tokenizer[key] = torch.tensor([any(c in p for c in last_chars) for p in pieces], dtype=torch.bool)
        return per_tokenizer[key]

    def hits(self, history: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """history [B', t+1]: each live row's response so far; last [B'] = history[:, -1].
        Returns [B'] bool: the row's response now contains a stop string."""
        if self.candidates.device != last.device:  # moved once, not at every step
            self.candidates = self.candidates.to(last.device)
        candidates = self.candidates  # [V_tok]
        in_vocab = last < candidates.shape[0]  # [B'] (a model may have more rows than the tokenizer)
        maybe = in_vocab & candidates[last.clamp(max=candidates.shape[0] - 1)]  # [B']
        out = torch.zeros_like(maybe)  # [B']
        index = maybe.nonzero(as_tuple=True)[0]  # [C]
        if index.numel() == 0:
            return out
        tails = history[index, -self.window :].tolist()  # C lists of <= window ids
        texts = decode_rows(self.tokenizer, tails)
        found = torch.tensor([any(s in text for s in self.stops) for text in texts], device=last.device)  # [C]
        out[index] = found
        return out

    def cut(self, ids: Sequence[int]) -> int:
        """The length of response `ids` under this rule: t + 1 for the first token t after which
        the text contains a stop string, else len(ids) (for a server that may not stop itself)."""
        ids = list(ids)
        for t, token in enumerate(ids):
            if token < self.candidates.shape[0] and bool(self.candidates[int(token)]):
                text = self.tokenizer.decode(ids[max(0, t + 1 - self.window) : t + 1], skip_special_tokens=True)
                if any(s in text for s in self.stops):
                    return t + 1
        return len(ids)


@torch.inference_mode()
def sample_tokens(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    stop_token_ids: Sequence[int] = (),
    pad_token_id: int = 0,
    generator: Optional[torch.Generator] = None,
    stop_strings: Optional[StopStrings] = None,
    should_stop: Optional[Callable[[], bool]] = None,
) -> list[tuple[list[int], list[float]]]:
    """Per prompt: (generated token ids, their sampler log-probs), the stopping token included.
    A row stops at a token in `stop_token_ids` or when `stop_strings.hits` (module docstring).
    `should_stop()`, asked before every token, abandons the whole call with DecodeStopped (a
    server shutting down, or a request past its deadline)."""
    if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
        raise ValueError(f"need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1; "
                         f"got {temperature}, {top_p}, {max_new_tokens}")
    device = next(model.parameters()).device
    # Identical prompts (the n rollouts of a group share their first prompt) are prefilled
    # once; the cache rows are then copied out to every row that uses them.
    first_row: dict = {}
    source = torch.as_tensor([first_row.setdefault(tuple(p), len(first_row)) for p in prompts], device=device)  # [B]
    ids, mask = left_pad([list(p) for p in first_row], pad_token_id, device)  # [U, P] each
    decoder = make_decoder(model, ids.shape[0], ids.shape[1] + max_new_tokens)
    # with worker threads (a large batch, several torch threads, CPU) the decoder's forwards run on
    # them and this thread's own ops, between them, on one torch thread (own_ops_on_one_thread)
    with own_ops_on_one_thread(decoder.worker_threads > 1):
        return _decode(decoder, ids, mask, source, n_rows=len(prompts), temperature=temperature, top_p=top_p,
                       max_new_tokens=max_new_tokens, stop_token_ids=stop_token_ids, pad_token_id=pad_token_id,
                       generator=generator, stop_strings=stop_strings, should_stop=should_stop)


def _decode(decoder, ids, mask, source, *, n_rows, temperature, top_p, max_new_tokens, stop_token_ids, pad_token_id,
            generator, stop_strings, should_stop) -> list[tuple[list[int], list[float]]]:
    """sample_tokens' prefill and token loop on `decoder`: ids, mask [U, P] are the distinct prompts,
    source [B] the prompt of each of the n_rows output rows."""
    device = ids.device
    logits = decoder.prefill(ids, mask)  # [U, V]
    if ids.shape[0] < n_rows:
        decoder.keep(source)
        logits, mask = logits[source], mask[source]  # [B, V], [B, P]
    next_position = mask.sum(dim=1)  # [B]: position of the first generated token
    stops = torch.as_tensor(list(stop_token_ids), dtype=torch.long, device=device)  # [S]
    out_tokens = torch.full((n_rows, max_new_tokens), pad_token_id, dtype=torch.long, device=device)  # [B, T]
    out_logp = torch.zeros(n_rows, max_new_tokens, device=device)  # [B, T]
    out_len = torch.full((n_rows,), max_new_tokens, dtype=torch.long, device=device)  # [B]
    rows = torch.arange(n_rows, device=device)  # [B']: original row of each live row
    for t in range(max_new_tokens):
        if should_stop is not None and should_stop():
            raise DecodeStopped(f"decoding abandoned after {t} of at most {max_new_tokens} tokens")
        tokens, logp = choose_tokens(logits, temperature=temperature, top_p=top_p, generator=generator)  # [B'] each
        out_tokens[rows, t] = tokens
        out_logp[rows, t] = logp
        if t == max_new_tokens - 1:
            break
        finished = torch.isin(tokens, stops)  # [B']
        if stop_strings is not None:
            finished |= stop_strings.hits(out_tokens[rows, : t + 1], tokens)  # [B']
        if finished.any():
            out_len[rows[finished]] = t + 1
            live = (~finished).nonzero(as_tuple=True)[0]  # [B'']
            if live.numel() == 0:
                break
            decoder.keep(live)
            rows, tokens, next_position = rows[live], tokens[live], next_position[live]
        logits = decoder.step(tokens, next_position)  # [B', V]
        next_position = next_position + 1  # [B']
    lengths = out_len.tolist()
    token_rows, logp_rows = out_tokens.tolist(), out_logp.tolist()
    return [(token_rows[b][: lengths[b]], logp_rows[b][: lengths[b]]) for b in range(n_rows)]


def make_policy(
    model,
    tokenizer,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    stop_tags: Sequence[str] = ("</action>",),
) -> Policy:
    """The rollout loop's `generate(prompts) -> [(text, prompt_ids, token_ids, sampler_logp)]`
    (docs/design.md, per-turn batch). `text` is the decoded response without pad/eos; the
    sampled ids are returned as they are, never re-tokenised. A response ends at eos or at the
    token that completes one of `stop_tags` in its text (`StopStrings`; a tag may be one token
    or several). Sampling runs on the model's device; the generator (or a new one seeded with
    `seed`) makes it reproducible."""
    device = next(model.parameters()).device
    if generator is None:
        generator = torch.Generator(device=device)
        if seed is not None:
            generator.manual_seed(seed)
    stop_ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
    stop_strings = StopStrings(tokenizer, stop_tags) if stop_tags else None
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def generate(prompts: list) -> list:
        if not prompts:
            return []
        # one batched call each way (the same ids and text as per-prompt encode/decode calls); a
        # tokenizer with a chat template wraps each prompt in it, as `arena eval` does
        prompt_ids = encode_prompts(tokenizer, prompts)
        outputs = sample_tokens(
            model, prompt_ids, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
            stop_token_ids=stop_ids, pad_token_id=pad_id or 0, generator=generator, stop_strings=stop_strings,
        )
        texts = decode_rows(tokenizer, [tokens for tokens, _ in outputs])
        return [(text, ids, tokens, logp) for text, ids, (tokens, logp) in zip(texts, prompt_ids, outputs)]

    return generate
