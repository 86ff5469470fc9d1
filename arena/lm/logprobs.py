"""Log-probs and entropy of response tokens in one forward pass.

Used by the trainer for the old, reference and current log-probs. Under grad mode the result
carries gradients; under `torch.no_grad()` it does not.
"""
from __future__ import annotations

import torch

from .decoding import prompt_positions


def token_logprobs_and_entropy(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp [N, T], entropy [N, T]) of the response tokens.

    prompt_ids/prompt_mask: [N, P], left-padded; response_ids/response_mask: [N, T],
    right-padded. The sequence is prompt ++ response; position ids count real tokens only
    (the sampler's convention). With q_t = softmax(logits_t / temperature), the logits at
    sequence position P - 1 + t predict response token t:
        logp[n, t]    = log q_t(response_ids[n, t])
        entropy[n, t] = -sum_v q_t(v) log q_t(v)
    Both are 0 where response_mask is 0."""
    if prompt_ids.shape != prompt_mask.shape or response_ids.shape != response_mask.shape:
        raise ValueError(
            f"shape mismatch: prompt_ids {tuple(prompt_ids.shape)} vs prompt_mask {tuple(prompt_mask.shape)}, "
            f"response_ids {tuple(response_ids.shape)} vs response_mask {tuple(response_mask.shape)}"
        )
    if prompt_ids.shape[0] != response_ids.shape[0] or temperature <= 0:
        raise ValueError(f"need the same N for prompt and response and temperature > 0; got "
                         f"{prompt_ids.shape[0]}, {response_ids.shape[0]}, T={temperature}")
    n_response = response_ids.shape[1]
    ids = torch.cat([prompt_ids, response_ids], dim=1).long()  # [N, P+T]
    mask = torch.cat([prompt_mask, response_mask], dim=1).long()  # [N, P+T]
    out = model(input_ids=ids, attention_mask=mask, position_ids=prompt_positions(mask), logits_to_keep=n_response + 1)
    logits = out.logits[:, :-1].float() / temperature  # [N, T, V]: positions P-1 .. P+T-2
    logq = torch.log_softmax(logits, dim=-1)  # [N, T, V]
    logp = logq.gather(-1, response_ids.long()[..., None])[..., 0]  # [N, T]
    entropy = -(logq.exp() * logq).sum(dim=-1)  # [N, T]
    keep = response_mask.bool()  # [N, T]
    zero = logp.new_zeros(())
    return torch.where(keep, logp, zero), torch.where(keep, entropy, zero)  # [N, T] each
