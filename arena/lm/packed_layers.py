"""The sampler's decoder layers with their weights packed, and each layer's math on them.

The sampler (decoding.StaticCacheDecoder) runs a Qwen3/Qwen2/Llama-style model layer by layer under
inference mode, one token per row and step. Through the model's own modules a layer issued ~40 small
torch calls per step (three projections, two per-head norms, two RoPEs, two MLP products, each a
module call); on the CPU that Python and per-op cost was most of a decode step of a small model. Here,
packed once per `sample_tokens` call (the weights change between calls, during training):

    [q | k | v] = x W_qkv^T + b_qkv      W_qkv = [W_q; W_k; W_v] diag(w_in)     ((Hq + 2 Hkv) D x H)
    [g | u]     = x W_gu^T               W_gu  = [W_gate; W_up] diag(w_post)    (2 I x H)
    mlp(x)      = (act(g) * u) W_down^T
    where x is the layer's RMSNorm without its weight, x_hat = h / sqrt(mean(h^2) + eps): the norm's
    weight w goes into the product after it, W (w * x_hat) = (W diag(w)) x_hat, one pass fewer
    Qwen3's per-head norms of q and k: one RMSNorm over the Hq + Hkv heads, times the weights
        [w_qnorm] * Hq ++ [w_knorm] * Hkv                              ((Hq + Hkv) x D)
    RoPE on the q and k heads at once: rope(x) = x cos + rotate_half(x) sin, where
        rotate_half(x) sin = roll(x, D/2) * [-sin_1 | sin_2]           (cos and sin repeat their halves)
    cos and sin of every position once per call, read by position

and the products run on oneDNN without the autograd function (linear_kernel.inference_linear) when the
model's layers do. Every element is the same sum of the same products as through the modules, with each
norm weight multiplied into W rather than into x_hat; that and a packed product's kernel blocking
round differently, so the logits agree up to float rounding (tests/lm/test_packed_layers.py).
RMSNorm is torch's `F.rms_norm`, bit-identical to HF's Qwen3RMSNorm in float32; the roll form of RoPE
is bit-identical to HF's rotate_half form.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .linear_kernel import OneDnnLinear, inference_linear

# Elements of the gate/up output [M, 2 I] from which feed_forward runs two products, not one: on the
# 2-core CPU kind A one product was as fast up to [4096, 512] and 0.76-0.88x slower from [8192, 384]
# (docs/testbed.md, "TextWorld resets by snapshot, norm weights inside the products"). Only speed depends on it.
SPLIT_GATE_UP_AT = 3 << 20


def _weight_and_bias(linears: list) -> tuple[torch.Tensor, torch.Tensor | None]:
    """W = [W_1; W_2; ...] [sum N_i, K] and b = [b_1; b_2; ...] (zeros where a layer has none; None
    when no layer has a bias)."""
    weight = torch.cat([m.weight for m in linears])  # [sum N_i, K]
    if all(m.bias is None for m in linears):
        return weight, None
    bias = torch.cat([m.bias if m.bias is not None else m.weight.new_zeros(m.out_features) for m in linears])
    return weight, bias  # [sum N_i, K], [sum N_i]


class PackedLayer:
    """One decoder layer's weights, packed (module docstring)."""

    def __init__(self, layer, *, heads: int, kv_heads: int, head_dim: int):
        attn, mlp = layer.self_attn, layer.mlp
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.onednn = isinstance(attn.q_proj, OneDnnLinear)
        input_norm, post_norm = layer.input_layernorm, layer.post_attention_layernorm
        self.input_eps, self.post_eps = input_norm.variance_epsilon, post_norm.variance_epsilon
        # each RMSNorm's weight w folded into the product after it: W (w * x_hat) = (W diag(w)) x_hat
        weight, bias = _weight_and_bias([attn.q_proj, attn.k_proj, attn.v_proj])  # [(Hq + 2 Hkv) D, H], ...
        self.qkv = (weight * input_norm.weight, bias)  # [(Hq + 2 Hkv) D, H], ...
        self.o = (attn.o_proj.weight, attn.o_proj.bias)  # [H, Hq D], ...
        weight, bias = _weight_and_bias([mlp.gate_proj, mlp.up_proj])  # [2 I, H], ...
        self.gate_up = (weight * post_norm.weight, bias)  # [2 I, H], ...
        self.down = (mlp.down_proj.weight, mlp.down_proj.bias)  # [H, I], ...
        self.act = mlp.act_fn
        self.scaling = attn.scaling
        self.qk_norm = None
        if hasattr(attn, "q_norm"):  # Qwen3 normalises each head of q and k before RoPE
            weight = torch.cat([attn.q_norm.weight.expand(heads, head_dim),
                                attn.k_norm.weight.expand(kv_heads, head_dim)])  # [Hq + Hkv, D]
            self.qk_norm = (weight, attn.q_norm.variance_epsilon, attn.k_norm.variance_epsilon)

    def attention_input(self, hidden: torch.Tensor) -> torch.Tensor:
        """x_hat = hidden / sqrt(mean(hidden^2) + eps) [B, Q, H]: the input norm without its weight,
        which W_qkv holds (project and project_last_query take x_hat)."""
        return F.rms_norm(hidden, (hidden.shape[-1],), None, self.input_eps)  # [B, Q, H]

    def linear(self, x: torch.Tensor, weight_bias: tuple) -> torch.Tensor:
        return inference_linear(x, *weight_bias, onednn=self.onednn)  # [..., N]

    def _qk_norm(self, t: torch.Tensor, heads: slice, eps: float) -> torch.Tensor:
        """Qwen3's RMSNorm of each head of t [B, Q, h, D] (heads: which of the Hq + Hkv weights)."""
        return F.rms_norm(t, (self.head_dim,), None, eps).mul_(self.qk_norm[0][heads])  # [B, Q, h, D]

    def project(self, x: torch.Tensor) -> tuple:
        """x [B, Q, H] (attention_input's x_hat) -> (qk [B, Q, Hq + Hkv, D]: q's heads then k's, normed, not yet rotated;
        v [B, Q, Hkv, D])."""
        n_q, n_kv, dim = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.head_dim
        qkv = self.linear(x, self.qkv)  # [B, Q, (Hq + 2 Hkv) D]
        qk = qkv[..., : n_q + n_kv].unflatten(-1, (self.heads + self.kv_heads, dim))  # [B, Q, Hq + Hkv, D]
        v = qkv[..., n_q + n_kv:].unflatten(-1, (self.kv_heads, dim))  # [B, Q, Hkv, D]
        if self.qk_norm is not None:
            _, q_eps, k_eps = self.qk_norm
            if q_eps == k_eps:  # always in Qwen3: one norm over all heads
                qk = self._qk_norm(qk, slice(None), q_eps)  # [B, Q, Hq + Hkv, D]
            else:
                qk = torch.cat([self._qk_norm(qk[:, :, : self.heads], slice(None, self.heads), q_eps),
                                self._qk_norm(qk[:, :, self.heads:], slice(self.heads, None), k_eps)], dim=2)
        return qk, v

    def project_last_query(self, x: torch.Tensor, x_last: torch.Tensor) -> tuple:
        """x [B, Q, H] (x_hat), x_last [B, 1, H] (the position whose query is wanted) -> (q [B, 1, Hq, D] of
        x_last, k [B, Q, Hkv, D], v [B, Q, Hkv, D]); q and k normed, not yet rotated. The products
        read row blocks of the packed weight:
            q = x_last W_q^T + b_q,   [k | v] = x W_kv^T + b_kv."""
        n_q, n_kv, dim = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.head_dim
        weight, bias = self.qkv
        q = self.linear(x_last, (weight[:n_q], None if bias is None else bias[:n_q]))  # [B, 1, Hq D]
        kv = self.linear(x, (weight[n_q:], None if bias is None else bias[n_q:]))  # [B, Q, 2 Hkv D]
        q = q.unflatten(-1, (self.heads, dim))  # [B, 1, Hq, D]
        k, v = kv[..., :n_kv].unflatten(-1, (self.kv_heads, dim)), kv[..., n_kv:].unflatten(-1, (self.kv_heads, dim))
        if self.qk_norm is not None:
            _, q_eps, k_eps = self.qk_norm
            q = self._qk_norm(q, slice(None, self.heads), q_eps)  # [B, 1, Hq, D]
            k = self._qk_norm(k, slice(self.heads, None), k_eps)  # [B, Q, Hkv, D]
        return q, k, v

    def feed_forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden + mlp(post_norm(hidden)) for hidden [B, Q, H]: mlp(x) = (act(x W_g^T) * x W_u^T) W_down^T.
        Up to SPLIT_GATE_UP_AT elements of [g | u], one product; above it (a long prefill chunk) two,
        on W_gu's row blocks, so act and * read contiguous g and u (reading half of a large [M, 2 I]
        output with stride 2 I cost more than the second product's call; the same numbers)."""
        x = F.rms_norm(hidden, (hidden.shape[-1],), None, self.post_eps)  # [B, Q, H]: post_norm's weight is in W_gu
        weight, bias = self.gate_up
        half = weight.shape[0] // 2
        if x.numel() // x.shape[-1] * weight.shape[0] < SPLIT_GATE_UP_AT:
            gate_up = self.linear(x, self.gate_up)  # [B, Q, 2 I]
            gate, up = gate_up[..., :half], gate_up[..., half:]  # [B, Q, I] each, strided
        else:
            gate = self.linear(x, (weight[:half], None if bias is None else bias[:half]))  # [B, Q, I]
            up = self.linear(x, (weight[half:], None if bias is None else bias[half:]))  # [B, Q, I]
        return self.linear(self.act(gate).mul_(up), self.down).add_(hidden)  # [B, Q, H]


def rotary_tables(model, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos [max_len, D], signed sin [max_len, D]) for positions 0 .. max_len - 1, from the model's
    own rotary embedding (one call: its cos and sin of a position do not depend on the others').
    signed sin = [-sin_1 | sin_2], so that rotate_half(x) sin = roll(x, D/2) * signed sin; it needs
    sin's halves equal (cos and sin of cat(freqs, freqs)), which every HF rotary embedding gives."""
    p = next(model.parameters())
    positions = torch.arange(max_len, device=p.device)[None]  # [1, S]
    cos, sin = model.model.rotary_emb(p.new_empty(0), positions)  # [1, S, D] each
    half = cos.shape[-1] // 2
    if not torch.equal(sin[..., :half], sin[..., half:]):
        raise ValueError("this rotary embedding's sin does not repeat its halves; the packed decoder needs it")
    return cos[0], torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1)  # [S, D] each


def rope_by_roll(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, Q, D] rotated: x cos + roll(x, D/2) signed_sin, cos and signed_sin [B, 1, Q, D]
    (HF's x cos + rotate_half(x) sin, bit for bit: rotate_half(x) = [-x_2 | x_1])."""
    rolled = x.roll(x.shape[-1] // 2, dims=-1).mul_(signed_sin)  # [B, heads, Q, D]
    return torch.mul(x, cos).add_(rolled)  # [B, heads, Q, D]: the same two products and sum, in place
