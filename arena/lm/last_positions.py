"""Logits at the last k positions of a sequence, with the last decoder layer run only where read.

The logits at positions S-k .. S-1 read the last layer's output at those positions only. At every
other position the last layer is read through its key and value alone (by the kept queries, and by
a later pass through the cache). So the last layer computes
    keys and values:                            every position (and writes them to the cache);
    query, attention, o_proj, residual, MLP:    the last k positions only,
and the final norm and lm head run on those k positions, as with HF's `logits_to_keep=k`. Each
op is HF's own module on a subset of the rows, so each kept logit equals the full forward's up to
float rounding (a matmul over fewer rows may round differently); gradients likewise.

What it saves: on the RL step's rows (a prompt of P tokens, a reply of T, k = T + 1) the last
layer's query, output and MLP work shrinks by a factor k / (P + T); on Sokoban's 2-layer model
(P ~ 89, T <= 8) that is about 40% of a forward's matmul FLOPs, and of its backward's.

Qwen3/Qwen2/Llama-style models with full attention and an "sdpa"-family attention (the embedded
model's `sdpa_gqa`, or "sdpa"), whose masks are boolean; any other model, or `trim=False`, runs
the model's own forward with `logits_to_keep=k`.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.masking_utils import create_causal_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .attention import ATTENTION
from .hf_cache import cache_kwargs, output_cache
from .decoding import rope, runs_layer_by_layer

BOOLEAN_MASK_ATTENTION = (ATTENTION, "sdpa")


def trims(model) -> bool:
    """Whether `last_logits` can run `model`'s last layer on the kept positions only."""
    return runs_layer_by_layer(model) and model.config._attn_implementation in BOOLEAN_MASK_ATTENTION


def last_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, keep: int, *,
                past_key_values=None, use_cache: bool = False, trim: bool = True):
    """(logits [B, keep, V] at the last `keep` positions, the cache or None), as
    `model(input_ids, attention_mask, position_ids, past_key_values, use_cache, logits_to_keep=keep)`.
    input_ids, position_ids: [B, S]; attention_mask: [B, S_past + S], 1 on real tokens."""
    n_new = input_ids.shape[1]
    if not trim or keep >= n_new or not trims(model):
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                    use_cache=use_cache, logits_to_keep=keep, **cache_kwargs(past_key_values))
        return out.logits, output_cache(out)
    base = model.model
    hidden = base.embed_tokens(input_ids)  # [B, S, H]
    if use_cache and past_key_values is None:
        past_key_values = DynamicCache(config=model.config)
    # [B, 1, S, S_past + S] bool (True: may attend), or None where the kernel's own causal mask does
    mask = create_causal_mask(config=model.config, inputs_embeds=hidden, attention_mask=attention_mask,
                              position_ids=position_ids, **cache_kwargs(past_key_values))
    cos_sin = base.rotary_emb(hidden, position_ids)  # ([B, S, D], [B, S, D])
    for layer in base.layers[:-1]:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=cos_sin, position_ids=position_ids,
                       use_cache=use_cache, **cache_kwargs(past_key_values))  # [B, S, H]
    hidden = _last_layer_at(base.layers[-1], hidden, mask, cos_sin, past_key_values, keep)  # [B, k, H]
    return model.lm_head(base.norm(hidden)), (past_key_values if use_cache else None)  # [B, k, V]


def _last_layer_at(layer, hidden: torch.Tensor, mask, cos_sin, cache, keep: int) -> torch.Tensor:
    """The decoder layer's output [B, k, H] at the last k positions of hidden [B, S, H] (module
    docstring): keys and values of every position, everything else at the k kept ones."""
    attn = layer.self_attn
    cos, sin = cos_sin  # [B, S, D] each
    batch, n_new, _ = hidden.shape
    x = layer.input_layernorm(hidden)  # [B, S, H]
    k = attn.k_proj(x).view(batch, n_new, -1, attn.head_dim)  # [B, S, Hkv, D]
    if hasattr(attn, "k_norm"):  # Qwen3 normalises each head before RoPE
        k = attn.k_norm(k)
    k = rope(k.transpose(1, 2), cos, sin)  # [B, Hkv, S, D]
    v = attn.v_proj(x).view(batch, n_new, -1, attn.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
    q = attn.q_proj(x[:, -keep:]).view(batch, keep, -1, attn.head_dim)  # [B, k, Hq, D]
    if hasattr(attn, "q_norm"):
        q = attn.q_norm(q)
    q = rope(q.transpose(1, 2), cos[:, -keep:], sin[:, -keep:])  # [B, Hq, k, D]
    if cache is not None:
        k, v = cache.update(k, v, attn.layer_idx)  # [B, Hkv, S_past + S, D] each
    n_keys = k.shape[2]
    if mask is None:  # no padding: kept query i sits at key index n_keys - k + i and sees keys <= it
        allowed = torch.ones(keep, n_keys, dtype=torch.bool, device=q.device).tril(n_keys - keep)[None, None]  # [1, 1, k, S']
    else:
        allowed = mask[:, :, -keep:]  # [B, 1, k, S']
    attention = ALL_ATTENTION_FUNCTIONS[attn.config._attn_implementation]
    out, _ = attention(attn, q, k, v, allowed, dropout=attn.attention_dropout if attn.training else 0.0,
                       scaling=attn.scaling)  # [B, k, Hq, D]
    kept = hidden[:, -keep:] + attn.o_proj(out.reshape(batch, keep, -1))  # [B, k, H]
    return kept + layer.mlp(layer.post_attention_layernorm(kept))  # [B, k, H]
