"""Log-probs and entropy of response tokens in one forward pass.

Used by the trainer for the old, reference and current log-probs. Under grad mode the result
carries gradients; under `torch.no_grad()` it does not.

Shared prompts (`share_prompts=True`, the RL trainer's choice): the rows of a turn batch often
repeat a prompt (the n rollouts of a group share their first prompt, and a group's episodes revisit
the same states). The model then runs each distinct prompt once, keeps its keys and values
(a DynamicCache), copies them out to every row that uses the prompt, and runs only the responses
on top. A response token attends to the same keys and values either way and positions count real
tokens in both, so every logit is the one-pass logit up to float rounding; under grad mode the
copies' backward (index_select's) sums the rows' gradients into the shared prompt, which is the
one-pass gradient too (tests/lm/test_shared_prompts.py).
"""
from __future__ import annotations

import torch

from .decoding import prompt_positions
from .hf_cache import cache_kwargs
from .last_positions import last_logits

# Share prompts only when at most this fraction of the rows' prompts is distinct: near 1 the second
# pass and the cache copies cost more than the few prompt tokens they save.
SHARE_AT_MOST = 0.9


def distinct_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first [U], source [N]): row first[j] holds the j-th distinct (ids, mask) prompt, in order of
    first appearance, and row n's prompt equals row first[source[n]]'s."""
    if prompt_ids.shape[0] == 0:  # an empty batch (every group filtered out): nothing to share
        empty = torch.zeros(0, dtype=torch.long, device=prompt_ids.device)  # [0]
        return empty, empty
    key = torch.cat([prompt_ids.long(), prompt_mask.long()], dim=1)  # [N, 2P]
    _, inverse = torch.unique(key, dim=0, return_inverse=True)  # [N]: the sorted distinct row of each row
    n = inverse.shape[0]
    first_sorted = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device=inverse.device)  # [U]
    first_sorted = first_sorted.scatter_reduce(0, inverse, torch.arange(n, device=inverse.device), reduce="amin")  # [U]: first row of each
    order = torch.argsort(first_sorted)  # [U]: distinct prompts by first appearance
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.shape[0], device=order.device))  # [U]: sorted -> appearance
    return first_sorted[order], rank[inverse]  # [U], [N]


def response_logits(model, prompt_ids, prompt_mask, response_ids, response_mask, *, share_prompts: bool = False,
                    trim_last_layer: bool = True):
    """Logits [N, T, V] at sequence positions P-1 .. P+T-2 (the ones that predict response tokens
    0 .. T-1), by one pass over prompt ++ response or, with `share_prompts` and enough repeats, by
    the shared-prompt pass (module docstring). `trim_last_layer`: the last layer runs its query,
    attention and MLP only at the positions whose logits are read (last_positions.py)."""
    n_response = response_ids.shape[1]
    mask = torch.cat([prompt_mask, response_mask], dim=1).long()  # [N, P+T]
    positions = prompt_positions(mask)  # [N, P+T]
    first, source = distinct_prompts(prompt_ids, prompt_mask) if share_prompts else (None, None)
    if first is None or first.shape[0] > SHARE_AT_MOST * prompt_ids.shape[0]:
        ids = torch.cat([prompt_ids, response_ids], dim=1).long()  # [N, P+T]
        logits, _ = last_logits(model, ids, mask, positions, n_response + 1, trim=trim_last_layer)  # [N, T+1, V]
        return logits[:, :-1]  # [N, T, V]
    width = prompt_ids.shape[1]
    head, cache = last_logits(model, prompt_ids[first].long(), prompt_mask[first].long(), positions[first, :width], 1,
                              use_cache=True, trim=trim_last_layer)  # [U, 1, V]; per layer [U, Hkv, P, D] keys and values
    cache.reorder_cache(source)  # per layer [N, Hkv, P, D]
    tail = model(input_ids=response_ids.long(), attention_mask=mask, position_ids=positions[:, width:],
                 use_cache=True, logits_to_keep=n_response, **cache_kwargs(cache))
    last_prompt = head[source]  # [N, 1, V]: predicts response token 0
    return torch.cat([last_prompt, tail.logits[:, :-1]], dim=1)  # [N, T, V]


def token_logprobs_and_entropy(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    temperature: float = 1.0,
    *,
    share_prompts: bool = False,
    trim_last_layer: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp [N, T], entropy [N, T]) of the response tokens.

    prompt_ids/prompt_mask: [N, P], left-padded; response_ids/response_mask: [N, T],
    right-padded. The sequence is prompt ++ response; position ids count real tokens only
    (the sampler's convention). With q_t = softmax(logits_t / temperature), the logits at
    sequence position P - 1 + t predict response token t:
        logp[n, t]    = log q_t(response_ids[n, t])
        entropy[n, t] = -sum_v q_t(v) log q_t(v)
    Both are 0 where response_mask is 0. `share_prompts`: run each distinct prompt once (module
    docstring); `trim_last_layer`: the last layer only where logits are read (last_positions.py);
    either way the result is the same up to float rounding."""
    if prompt_ids.shape != prompt_mask.shape or response_ids.shape != response_mask.shape:
        raise ValueError(
            f"shape mismatch: prompt_ids {tuple(prompt_ids.shape)} vs prompt_mask {tuple(prompt_mask.shape)}, "
            f"response_ids {tuple(response_ids.shape)} vs response_mask {tuple(response_mask.shape)}"
        )
    if prompt_ids.shape[0] != response_ids.shape[0] or temperature <= 0:
        raise ValueError(f"need the same N for prompt and response and temperature > 0; got "
                         f"{prompt_ids.shape[0]}, {response_ids.shape[0]}, T={temperature}")
    logits = response_logits(model, prompt_ids, prompt_mask, response_ids, response_mask,
                             share_prompts=share_prompts, trim_last_layer=trim_last_layer).float() / temperature  # [N, T, V]
    logq = torch.log_softmax(logits, dim=-1)  # [N, T, V]
    logp = logq.gather(-1, response_ids.long()[..., None])[..., 0]  # [N, T]
    entropy = -(logq.exp() * logq).sum(dim=-1)  # [N, T]
    keep = response_mask.bool()  # [N, T]
    zero = logp.new_zeros(())
    return torch.where(keep, logp, zero), torch.where(keep, entropy, zero)  # [N, T] each
