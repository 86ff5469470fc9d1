"""Incremental forward passes for the sampler: prefill once, then one token per step.

Two decoders share one interface (`prefill`, `step`, `keep`):

- `StaticCacheDecoder`, the fast path for Qwen3/Qwen2/Llama-style models (full attention,
  RoPE): it runs the model layer by layer on its weights packed per call (packed_layers.py:
  one q/k/v product, one gate/up product, q and k normed and rotated together, cos and sin read
  from one table), with the model's own embedding, final norm and lm head. It keeps K/V in one
  preallocated tensor per layer, written in place, and folds the query heads of each KV group
  into the query axis instead of copying K/V per head. HF's DynamicCache re-concatenates the
  whole cache and `repeat_kv` copies it at every step; on CPU those copies cost more than the
  matmuls of a small model.
- `HFCacheDecoder`, the generic path for any other causal LM: `model(...)` with a
  DynamicCache, a 2-D attention mask and explicit position ids.

Worker threads: on the CPU with T > 1 torch threads and a batch of at least 2 *
DECODE_ROWS_PER_WORKER distinct prompts, StaticCacheDecoder runs the prefill's chunks, each decode
step's row blocks (decode_blocks) and the cache compaction's gathers on min(T, batch //
DECODE_ROWS_PER_WORKER) worker threads of one torch thread each (micro_threads.py, `worker_threads`),
and sample_tokens runs its own small ops between them on one thread
(micro_threads.own_ops_on_one_thread). A chunk is the same computation on whichever thread, so the
prefill equals the one-thread prefill bit for bit; a row block runs each product on fewer rows,
which a BLAS may round differently (measured equal on the 2-core CPU kind A of docs/testbed.md,
"The sampler on worker threads"). Two intra-op threads split a decode step's small products and its
attention of one query per row poorly; a smaller batch on several intra-op threads takes that
attention as two batched products and a softmax (`attention_by_matmul`: the same formula, other
rounding; docs/testbed.md, "The sampler's cache copies").

Both take left-padded prompts. Positions count real tokens only:
position(b, j) = (number of real prompt tokens of row b up to j) - 1, and generated token t of
row b sits at position len_b + t, exactly as in one full forward pass over the padded sequence.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.qwen3.modeling_qwen3 import rotate_half

from .hf_cache import cache_kwargs, output_cache

from .micro_threads import ordered_map, worker_count
from .packed_layers import PackedLayer, rope_by_roll, rotary_tables

FAST_MODEL_TYPES = ("qwen3", "qwen2", "llama")
PREFILL_ROWS = 32  # rows per prefill chunk (bounds its activations)
# a decode step's rows are cut into worker blocks of at least this many, and a batch of fewer than
# twice as many uses no worker threads at all: on two threads batches of 256 rows sampled in 0.89-0.91
# of the time without workers, batches of 128 in 0.97-1.13, of 64 in 1.13-1.43 (docs/testbed.md,
# "The sampler on worker threads")
DECODE_ROWS_PER_WORKER = 96


def decode_blocks(n_rows: int, threads: int) -> list[slice]:
    """A decode step's rows cut into W contiguous blocks, one per worker thread: W = min(threads,
    n_rows // DECODE_ROWS_PER_WORKER), at least 1, sizes as equal as can be (the first n_rows mod W
    blocks one row longer)."""
    workers = max(1, min(threads, n_rows // DECODE_ROWS_PER_WORKER))
    size, extra = divmod(n_rows, workers)
    bounds = [0]
    for w in range(workers):
        bounds.append(bounds[-1] + size + (w < extra))
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def runs_layer_by_layer(model) -> bool:
    """Whether arena may run `model` layer by layer: a Qwen3/Qwen2/Llama-style model
    (FAST_MODEL_TYPES) whose every layer has full attention, and a RoPE whose angles depend on the
    position alone (not a "dynamic" or "longrope" one, which rescales with the sequence's length),
    so one table of cos and sin serves every step."""
    config = model.config
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    sliding = getattr(config, "use_sliding_window", False)
    rope_type = str((getattr(config, "rope_parameters", None) or {}).get("rope_type", "default"))
    static_rope = "dynamic" not in rope_type and rope_type != "longrope"
    return (config.model_type in FAST_MODEL_TYPES and all(t == "full_attention" for t in layer_types)
            and not sliding and static_rope)


def make_decoder(model, batch: int, max_len: int, *, trim_prefill: bool = True):
    """The fast decoder when the model's architecture allows it, else the generic one.
    `trim_prefill`: the fast decoder's prefill runs the last layer's query, attention and MLP at
    each prompt's last position only (StaticCacheDecoder.prefill). The fast decoder of a large
    batch on the CPU with T > 1 torch threads runs its forwards on worker threads (module docstring)."""
    if runs_layer_by_layer(model):
        return StaticCacheDecoder(model, batch, max_len, trim_prefill=trim_prefill)
    return HFCacheDecoder(model)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF's rotary embedding (apply_rotary_pos_emb) of one tensor x [B, heads, L, D] with cos, sin
    [B, L, D]: x cos + rotate_half(x) sin, the same ops in the same order."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]  # [B, heads, L, D]


def prompt_positions(mask: torch.Tensor) -> torch.Tensor:
    """position = cumsum(mask) - 1 on real tokens, 0 on the left padding."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)  # [B, P]


class StaticCacheDecoder:
    def __init__(self, model, batch: int, max_len: int, *, trim_prefill: bool = True):
        self.model = model
        self.trim_prefill = trim_prefill
        self.base = model.model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        # the weights as they are now, packed (packed_layers.py); a new decoder per sample_tokens call
        self.layers = [PackedLayer(layer, heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim)
                       for layer in self.base.layers]
        self.cos, self.signed_sin = rotary_tables(model, max_len)  # [S, D] each
        p = next(model.parameters())
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        # not zeroed: a prefill chunk zeroes the slots before its own (_prefill_chunk) and writes the rest of
        # the prompt's; a decode step writes its slot before reading it. Slots past `length` are never read
        self.keys = [torch.empty(shape, dtype=p.dtype, device=p.device) for _ in self.layers]  # L x [B, Hkv, S, D]
        self.values = [torch.empty_like(k) for k in self.keys]  # L x [B, Hkv, S, D]
        # additive attention mask of the cached keys: 0 on a real key, -inf elsewhere (one tensor for
        # every layer and step; SDPA would otherwise turn a boolean mask into this at every call)
        self.key_bias = torch.full((batch, max_len), float("-inf"), dtype=p.dtype, device=p.device)  # [B, S]
        self.length = 0  # cache slots used so far (same for every row)
        # after a prefill of unsorted prompts: the cache row that holds each prompt's row, [B], and the
        # prompt in each cache row, [B] (steps run the rows in cache order; the next keep applies them)
        self.pending = self.cache_order = None
        # worker threads of one torch thread each (micro_threads.py) for the prefill's chunks and a
        # decode step's row blocks: each writes and reads its own cache rows
        self.worker_threads = worker_count(batch // DECODE_ROWS_PER_WORKER, p.device)
        # a decode step on several intra-op threads (CPU, no worker threads) takes its attention as two
        # batched products and a softmax: CPU flash attention of one query per row ran slower on two
        # threads than on one (docs/testbed.md, "The sampler's cache copies"). Its rounding differs, so
        # one thread and worker threads (one torch thread each) keep flash attention and their numbers.
        # float32 only: in a lower precision its softmax would run in that precision, where flash
        # attention accumulates in float32
        self.attention_by_matmul = (p.device.type == "cpu" and p.dtype == torch.float32 and self.worker_threads == 1
                                    and torch.get_num_threads() > 1)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits of the next token after each (left-padded) prompt. ids, mask: [B, P].

        Rows are sorted by length and prefilled in chunks of PREFILL_ROWS, each chunk cut to
        its own longest prompt W, so little compute goes to padding. Within a chunk the prompts are
        moved to the left (real tokens first, padding after: `_prefill_chunk`). The chunk fills the
        cache slots P - W .. P - 1, a prompt of length n the first n of them; every other slot stays
        an invalid key (key_bias -inf), so decode steps see the same keys at the same positions as
        one forward pass of the padded sequence. Chunk c goes to the cache rows c * PREFILL_ROWS
        onwards (sorted order: slices, not scattered rows); `pending` maps each prompt to its cache
        row, and the next `keep` puts the rows back in order as it copies them (a `keep` right after
        the prefill, as for a group's repeated prompts, or when the first rows finish, costs no extra
        copy); a `step` before it runs the rows in the cache's order. The chunks are independent
        (each writes its own cache rows and returns its own logits): with worker threads
        (`worker_threads` > 1) they run on them, one torch thread each, in the same order of results."""
        n_rows, n_prompt = ids.shape
        lengths = mask.sum(dim=1)  # [B]
        order = lengths.argsort(stable=True)  # [B]: the prompts, shortest first (already sorted: identity)
        firsts = range(0, n_rows, PREFILL_ROWS)

        def prefill_chunk(first: int) -> torch.Tensor:
            rows = order[first : first + PREFILL_ROWS]  # [b]: this chunk's prompts
            sub_lengths = lengths[rows]  # [b]
            width = int(sub_lengths.max())
            # token j of prompt r sits at column P - n_r + j of the left-padded ids (j < n_r); the
            # columns past a prompt's end repeat its last token (padding: never read, never attended)
            columns = (n_prompt - sub_lengths)[:, None] + torch.arange(width, device=ids.device)  # [b, W]
            sub_ids = ids[rows[:, None], columns.clamp(max=n_prompt - 1)]  # [b, W]
            return self._prefill_chunk(sub_ids, sub_lengths, start=n_prompt - width,
                                       rows=slice(first, first + rows.shape[0]))  # [b, V]

        logits = None
        # chunks write disjoint cache rows: on several torch threads they run on worker threads
        workers = min(self.worker_threads, len(firsts))
        # all chunks in flight at once: a worker never waits for another's chunk to be taken (each
        # result is one [b, V] row block of logits)
        chunks = ordered_map(prefill_chunk, firsts, workers, threads=self.worker_threads, in_flight=len(firsts))
        for first, out in zip(firsts, chunks):
            if logits is None:
                logits = out.new_empty(n_rows, out.shape[-1])  # [B, V]
            logits[order[first : first + PREFILL_ROWS]] = out
        self.length = n_prompt
        identity = torch.arange(n_rows, device=order.device)  # [B]
        self.pending = None if torch.equal(order, identity) else order.argsort()  # [B]: cache row of prompt b
        self.cache_order = None if self.pending is None else order  # [B]: prompt in cache row r
        return logits  # [B, V]

    def _prefill_chunk(self, ids: torch.Tensor, lengths: torch.Tensor, *, start: int, rows: slice) -> torch.Tensor:
        """Next-token logits [b, V] of prompts ids [b, W] (real tokens first: prompt r is ids[r, :n_r],
        n_r = lengths[r]), writing their K/V into cache rows `rows`, slots start .. start + W - 1.
        Token j sits at position j, and query j attends keys 0 .. j (SDPA's own causal mask, no mask
        tensor): for j < n_r those are all real tokens, and the queries past n_r are never read.
        Only position n_r - 1's logits are read, so with `trim_prefill` the last layer computes keys
        and values at every position but its query, attention and MLP at that one only (as
        arena/lm/last_positions.py does for training): the same logits up to float rounding."""
        batch, width = ids.shape
        stop = start + width
        real = torch.arange(width, device=ids.device) < lengths[:, None]  # [b, W]
        self.key_bias[rows, start:stop].masked_fill_(real, 0.0)
        read = (torch.arange(batch, device=ids.device), lengths - 1)  # (row, position) of each logit read
        if start > 0:  # the slots before this chunk's: no key of these rows (key_bias -inf), but read as 0 * v
            for cache in self.keys + self.values:
                cache[rows, :, :start].zero_()
        hidden = self.base.embed_tokens(ids)  # [b, W, H]
        cos, sin = self.cos[None, None, :width], self.signed_sin[None, None, :width]  # [1, 1, W, D] each
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer.attention_input(hidden)  # [b, W, H]
            if i == last and self.trim_prefill and width > 1:
                # from here on only position n_r - 1 is read: its query, its residual; it attends to
                # the prompt's real keys (all of them precede it)
                q, k, v = layer.project_last_query(x, x[read][:, None])  # [b, 1, Hq, D], [b, W, Hkv, D] x2
                hidden = hidden[read][:, None]  # [b, 1, H]
                at = lengths - 1  # [b]
                q = rope_by_roll(q.transpose(1, 2), self.cos[at][:, None, None],
                                 self.signed_sin[at][:, None, None])  # [b, Hq, 1, D]
                k = rope_by_roll(k.transpose(1, 2), cos, sin)  # [b, Hkv, W, D]
                bias = self.key_bias[rows, None, None, start:stop]  # [b, 1, 1, W]
            else:
                qk, v = layer.project(x)  # [b, W, Hq + Hkv, D], [b, W, Hkv, D]
                qk = rope_by_roll(qk.transpose(1, 2), cos, sin)  # [b, Hq + Hkv, W, D]: q's heads, then k's
                q, k = qk[:, : self.heads], qk[:, self.heads:]  # [b, Hq, W, D], [b, Hkv, W, D]
                bias = None  # causal
            v = v.transpose(1, 2)  # [b, Hkv, W, D]
            self.keys[i][rows, :, start:stop] = k
            self.values[i][rows, :, start:stop] = v
            out = self._attend(q, k, v, bias, layer.scaling)  # [b, Q', Hq, D]
            hidden = layer.linear(out.reshape(batch, q.shape[2], -1), layer.o).add_(hidden)  # [b, Q', H]
            hidden = feed_forward(layer, hidden)  # [b, Q', H]
        if hidden.shape[1] > 1:
            hidden = hidden[read][:, None]  # [b, 1, H]
        return self.model.lm_head(self.base.norm(hidden))[:, -1]  # [b, V]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Append one token per row (tokens, positions: [B]); return next-token logits [B, V].
        On several torch threads (CPU) the rows are cut into one block per worker thread
        (decode_blocks), each run through the model by `_forward` on its own cache rows.
        Right after a prefill whose prompts it sorted, the rows run in the cache's order (tokens and
        positions taken in that order, the logits put back in the prompts'), not the cache put back in
        the prompts' order: one gather of [B] and one of the logits instead of one of every cache
        tensor; each row's numbers do not depend on where it sits in the batch."""
        if self.pending is not None:
            tokens, positions = tokens[self.cache_order], positions[self.cache_order]  # [B] each, cache order
        slot = self.length
        self.key_bias[:, slot] = 0.0
        self.length += 1
        blocks = decode_blocks(tokens.shape[0], self.worker_threads)

        def forward_block(rows: slice) -> torch.Tensor:
            return self._forward(tokens[rows, None], positions[rows, None], start=slot, rows=rows)[:, -1]  # [b, V]

        if len(blocks) == 1:
            logits = forward_block(blocks[0])  # [B, V]
        else:
            logits = torch.cat(list(ordered_map(forward_block, blocks, len(blocks), threads=self.worker_threads)))  # [B, V]
        return logits if self.pending is None else logits.index_select(0, self.pending)  # [B, V], prompts' order

    def keep(self, rows: torch.Tensor) -> None:
        """Keep the rows `rows` (of the prompts' order), in that order: drops finished rows, or
        repeats rows."""
        if self.pending is not None:
            rows, self.pending, self.cache_order = self.pending[rows], None, None  # [B']: their cache rows
        n_layers = len(self.keys)
        # one gather per layer's keys and values (2L copies; on worker threads when there are several);
        # index_select, not cache[rows]: the same copy, 3.5x faster on the CPU (docs/testbed.md, "The
        # sampler's cache copies")
        gathered = list(ordered_map(lambda cache: cache.index_select(0, rows), self.keys + self.values,
                                    min(self.worker_threads, 2 * n_layers), threads=self.worker_threads))
        self.keys, self.values = gathered[:n_layers], gathered[n_layers:]  # L x [B', Hkv, S, D] each
        self.key_bias = self.key_bias.index_select(0, rows)  # [B', S]

    def _forward(self, ids, positions, *, start: int, rows: slice) -> torch.Tensor:
        """Run one new token per row, ids [b, 1] at positions [b, 1] (the cache rows `rows`), through
        the model, writing its K/V into cache slot `start`; it attends to the cached slots
        0 .. start through key_bias (the additive mask: 0 may attend, -inf may not, one for all
        layers). Returns logits [b, 1, V]."""
        batch = ids.shape[0]
        stop = start + 1
        bias = self.key_bias[rows, None, None, :stop]  # [b, 1, 1, S']
        hidden = self.base.embed_tokens(ids)  # [b, 1, H]
        cos, sin = self.cos[positions][:, None], self.signed_sin[positions][:, None]  # [b, 1, 1, D] each
        for i, layer in enumerate(self.layers):
            x = layer.attention_input(hidden)  # [b, 1, H]
            qk, v = layer.project(x)  # [b, 1, Hq + Hkv, D], [b, 1, Hkv, D]
            qk = rope_by_roll(qk.transpose(1, 2), cos, sin)  # [b, Hq + Hkv, 1, D]: q's heads, then k's
            self.keys[i][rows, :, start:stop] = qk[:, self.heads:]
            self.values[i][rows, :, start:stop] = v.transpose(1, 2)
            k, v = self.keys[i][rows, :, :stop], self.values[i][rows, :, :stop]  # [b, Hkv, S', D]
            out = self._attend(qk[:, : self.heads], k, v, bias, layer.scaling)  # [b, 1, Hq, D]
            hidden = layer.linear(out.reshape(batch, 1, -1), layer.o).add_(hidden)  # [b, 1, H]
            hidden = feed_forward(layer, hidden)  # [b, 1, H]
        return self.model.lm_head(self.base.norm(hidden))  # [b, 1, V]

    def _attend(self, q, keys, values, bias, scale) -> torch.Tensor:
        """softmax(q k^T * scale + bias) v, with G = Hq / Hkv query heads per KV head.
        q: [B, Hq, Q, D]; keys, values: [B, Hkv, S, D]; bias [B, 1, Q, S], or None for the causal
        mask of Q = S (query j attends keys 0 .. j); returns [B, Q, Hq, D]."""
        batch, _, n_new, dim = q.shape
        group = self.heads // self.kv_heads
        if n_new == 1:
            # One query per row: the G heads of a group become G query rows against the same K/V (no copy).
            q = q.reshape(batch, self.kv_heads, group, dim)  # [B, Hkv, G, D]
            if self.attention_by_matmul:
                # the same formula as two batched products: scores = q k^T * scale + bias (-inf on the
                # keys a row may not see, exp(-inf) = 0 in the softmax), out = softmax(scores) v
                scores = torch.matmul(q, keys.transpose(-1, -2)).mul_(scale).add_(bias)  # [B, Hkv, G, S]
                out = torch.softmax(scores, dim=-1).matmul(values)  # [B, Hkv, G, D]
            else:
                out = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, scale=scale)  # [B, Hkv, G, D]
            return out.reshape(batch, 1, self.heads, dim)  # [B, 1, Hq, D]
        # Prefill: SDPA reads the grouped K/V heads itself (as arena/lm/attention.py); with no mask
        # tensor its causal kernel skips the key blocks after each query block
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, scale=scale, is_causal=bias is None,
                                             enable_gqa=group > 1)  # [B, Hq, Q, D]
        return out.transpose(1, 2)  # [B, Q, Hq, D]


def feed_forward(layer: PackedLayer, hidden: torch.Tensor) -> torch.Tensor:
    """hidden + mlp(post_norm(hidden)) (PackedLayer.feed_forward); a module-level name, so a test can
    watch how many positions the last layer's MLP runs."""
    return layer.feed_forward(hidden)


class HFCacheDecoder:
    """Any HF causal LM through its own forward with a DynamicCache."""

    worker_threads = 1  # runs on the calling thread, at torch's thread count

    def __init__(self, model):
        self.model = model
        self.cache = None
        self.mask = None  # [B, S] 2-D attention mask of everything cached so far

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self.mask = mask.long()  # [B, P]
        out = self.model(input_ids=ids, attention_mask=self.mask, position_ids=prompt_positions(mask),
                         use_cache=True, logits_to_keep=1)
        self.cache = output_cache(out)
        return out.logits[:, -1]  # [B, V]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        ones = torch.ones(tokens.shape[0], 1, dtype=self.mask.dtype, device=self.mask.device)  # [B, 1]
        self.mask = torch.cat([self.mask, ones], dim=1)  # [B, S+1]
        out = self.model(
            input_ids=tokens[:, None], attention_mask=self.mask, position_ids=positions[:, None],
            use_cache=True, **cache_kwargs(self.cache),
        )
        self.cache = output_cache(out)
        return out.logits[:, -1]  # [B, V]

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.reorder_cache(rows)
        self.mask = self.mask[rows]  # [B', S]
