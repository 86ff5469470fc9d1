"""`sdpa_gqa`: the embedded model's attention, SDPA with grouped key/value heads kept grouped.

Qwen3 has fewer key/value heads (Hkv) than query heads (Hq = Hkv * G). Query head h reads
key/value head h // G:
    out[b, h] = softmax(q[b, h] k[b, h // G]^T * scale + mask[b]) v[b, h // G]
HF's "sdpa" attention computes this by copying every key/value head G times (`repeat_kv`) whenever
an attention mask is given, and the embedded backend's batches are left-padded, so always; the
copies' backward then sums the G copies' gradients. torch's SDPA reads the grouped heads itself
(`enable_gqa=True`), on the same CPU flash kernel, with or without a mask. On other devices
this is HF's "sdpa" as is: there a mask with grouped heads sends SDPA to its slower math kernel.

Equality (tests/lm/test_attention.py): the forward runs the same kernel on the same numbers
per query head, so logits are bit-identical to "sdpa"; in the backward the kernel sums a key/value
head's G query heads' gradients in its own order, so gradients equal "sdpa"'s up to float rounding.
Speed: docs/design.md, "The step's log-probs and update" (the RL step and BC, benchmarks/).

Registered with transformers' attention and mask registries under ATTENTION; the name lives in the
loaded model's config only, never in a saved config.json, so a saved policy loads in plain
transformers (as "sdpa" there).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "sdpa_gqa"


def sdpa_gqa_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                       is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """HF's attention signature: query [B, Hq, Q, D], key and value [B, Hkv, K, D], attention_mask
    [B, 1, Q, K] (bool, True = may attend) or None; returns ([B, Q, Hq, D], no weights)."""
    if query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # as HF's sdpa: the kernel's own causal mask only without a mask and with more than one query
    causal = query.shape[2] > 1 and attention_mask is None and causal
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=causal,
        enable_gqa=query.shape[1] != key.shape[1],
    )  # [B, Hq, Q, D]
    return out.transpose(1, 2).contiguous(), None  # [B, Q, Hq, D]


AttentionInterface.register(ATTENTION, sdpa_gqa_attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)  # the same 4-D boolean mask as "sdpa"
