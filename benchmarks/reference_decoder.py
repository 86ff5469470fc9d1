"""The sampler's decoder before its layers were packed (arena/lm/packed_layers.py): the "before" of
benchmarks/bench_eval.py and bench_sampler.py for the decoder, kept here as it was (commit 45904f3), so
that the reference path cannot drift with today's decoder. It runs the model's own modules layer by
layer (three projections, two per-head norms, two RoPEs, the MLP's modules, the rotary embedding at
every step), with the same static cache, prefill chunks and decode attention as today's.
benchmarks/reference_sampler.py builds it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from arena.lm.decoding import PREFILL_ROWS, prompt_positions, rope


class StaticCacheDecoder:
    def __init__(self, model, batch: int, max_len: int, *, trim_prefill: bool = True):
        self.model = model
        self.trim_prefill = trim_prefill
        self.base = model.model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        p = next(model.parameters())
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        n_layers = len(self.base.layers)
        self.keys = [torch.zeros(shape, dtype=p.dtype, device=p.device) for _ in range(n_layers)]  # L x [B, Hkv, S, D]
        self.values = [torch.zeros_like(k) for k in self.keys]  # L x [B, Hkv, S, D]
        self.key_valid = torch.zeros(batch, max_len, dtype=torch.bool, device=p.device)  # [B, S]
        self.length = 0  # cache slots used so far (same for every row)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits of the next token after each (left-padded) prompt. ids, mask: [B, P].

        Rows are sorted by length and prefilled in chunks of PREFILL_ROWS, each chunk cut to
        its own longest prompt, so little compute goes to padding. A chunk of width W fills the
        cache slots P - W .. P - 1; the slots before stay invalid keys. Only the last position's
        logits are read, so with `trim_prefill` the last layer computes keys and values at every
        position but its query, attention and MLP at the last one only (as
        arena/lm/last_positions.py does for training): the same logits up to float rounding."""
        n_rows, n_prompt = ids.shape
        lengths = mask.sum(dim=1)  # [B]
        logits = None
        for rows in lengths.argsort().split(PREFILL_ROWS):
            width = int(lengths[rows].max())
            sub_ids, sub_mask = ids[rows, n_prompt - width :], mask[rows, n_prompt - width :]  # [b, W] each
            self.key_valid[rows, n_prompt - width : n_prompt] = sub_mask.bool()
            # Query j attends key k iff k <= j and k is a real token; each position also sees
            # itself so that padding rows stay finite (their outputs are never used).
            causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()  # [W, W]
            itself = torch.eye(width, dtype=torch.bool, device=ids.device)  # [W, W]
            allowed = (causal & sub_mask.bool()[:, None, :]) | itself  # [b, W, W]
            out = self._forward(sub_ids, prompt_positions(sub_mask), allowed[:, None],
                                start=n_prompt - width, rows=rows)  # [b, 1, V]
            if logits is None:
                logits = out.new_empty(n_rows, out.shape[-1])  # [B, V]
            logits[rows] = out[:, -1]
        self.length = n_prompt
        return logits  # [B, V]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Append one token per row (tokens, positions: [B]); return next-token logits [B, V]."""
        slot = self.length
        self.key_valid[:, slot] = True
        allowed = self.key_valid[:, None, None, : slot + 1]  # [B, 1, 1, S']
        self.length += 1
        return self._forward(tokens[:, None], positions[:, None], allowed, start=slot)[:, -1]  # [B, V]

    def keep(self, rows: torch.Tensor) -> None:
        """Keep the cache rows `rows`, in that order: drops finished rows, or repeats rows."""
        self.keys = [k[rows] for k in self.keys]  # L x [B', Hkv, S, D]
        self.values = [v[rows] for v in self.values]  # L x [B', Hkv, S, D]
        self.key_valid = self.key_valid[rows]  # [B', S]

    def _forward(self, ids, positions, allowed, *, start: int, rows=None) -> torch.Tensor:
        """Run the new tokens ids [b, Q] through the model, writing their K/V into cache slots
        start .. start+Q-1. Decode (rows None): every row, attending to all cached slots.
        Prefill (rows given): only those cache rows, attending to the chunk's own keys."""
        batch, n_new = ids.shape
        stop = start + n_new
        hidden = self.base.embed_tokens(ids)  # [B, Q, H]
        cos, sin = self.base.rotary_emb(hidden, positions)  # [B, Q, D] each
        last = len(self.base.layers) - 1
        for i, layer in enumerate(self.base.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(hidden)  # [B, Q, H]
            k = attn.k_proj(x).view(batch, n_new, self.kv_heads, self.head_dim)  # [B, Q, Hkv, D]
            v = attn.v_proj(x).view(batch, n_new, self.kv_heads, self.head_dim)  # [B, Q, Hkv, D]
            if i == last and rows is not None and self.trim_prefill and n_new > 1:
                # from here on only the last position is read: its query, its mask row, its residual
                hidden, x, allowed = hidden[:, -1:], x[:, -1:], allowed[:, :, -1:]  # [B, 1, H] x2, [B, 1, 1, Q]
            n_query = x.shape[1]
            residual = hidden
            q = attn.q_proj(x).view(batch, n_query, self.heads, self.head_dim)  # [B, Q', Hq, D]
            if hasattr(attn, "q_norm"):  # Qwen3 normalises each head before RoPE
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = rope(q.transpose(1, 2), cos[:, -n_query:], sin[:, -n_query:])  # [B, Hq, Q', D]
            k = rope(k.transpose(1, 2), cos, sin)  # [B, Hkv, Q, D]
            v = v.transpose(1, 2)  # [B, Hkv, Q, D]
            if rows is None:
                self.keys[i][:, :, start:stop] = k
                self.values[i][:, :, start:stop] = v
                k, v = self.keys[i][:, :, :stop], self.values[i][:, :, :stop]  # [B, Hkv, S', D]
            else:
                self.keys[i][rows, :, start:stop] = k
                self.values[i][rows, :, start:stop] = v
            out = self._attend(q, k, v, allowed, attn.scaling)
            hidden = residual + attn.o_proj(out.reshape(batch, n_query, -1))  # [B, Q', H]
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))  # [B, Q', H]
        hidden = self.base.norm(hidden[:, -1:])  # [B, 1, H]
        return self.model.lm_head(hidden)  # [B, 1, V]

    def _attend(self, q, keys, values, allowed, scale) -> torch.Tensor:
        """softmax(q k^T * scale + mask) v, with G = Hq / Hkv query heads per KV head.
        q: [B, Hq, Q, D]; keys, values: [B, Hkv, S, D]; returns [B, Q, Hq, D]."""
        batch, _, n_new, dim = q.shape
        group = self.heads // self.kv_heads
        if n_new == 1:
            # Decode: the G heads of a group become G query rows against the same K/V (no copy).
            q = q.reshape(batch, self.kv_heads, group, dim)  # [B, Hkv, G, D]
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, scale=scale)  # [B, Hkv, G, D]
            return out.reshape(batch, 1, self.heads, dim)  # [B, 1, Hq, D]
        keys = keys.repeat_interleave(group, dim=1)  # [B, Hq, S, D]
        values = values.repeat_interleave(group, dim=1)  # [B, Hq, S, D]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, scale=scale)  # [B, Hq, Q, D]
        return out.transpose(1, 2)  # [B, Q, Hq, D]
