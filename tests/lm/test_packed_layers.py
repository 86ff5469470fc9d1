"""The sampler's packed decoder layers (arena/lm/packed_layers.py) against the model's own modules, the
fast decoder against the generic one on three architectures, and the tokenizer's batch calls."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

from arena.lm import decoding, packed_layers, sampler
from arena.lm.linear_kernel import OneDnnLinear, OneDnnLinearFunction, inference_linear, set_linear_kernel
from arena.lm.model import build_model
from arena.lm.packed_layers import PackedLayer, rope_by_roll, rotary_tables
from arena.lm.sampler import sample_tokens
from arena.lm.tokenizer import KINDS, build_tokenizer, decode_rows, encode_texts

pytestmark = pytest.mark.usefixtures("one_thread")

# float32 rounding of sums of ~100 products of size ~1 (the packed product may block differently)
ATOL = 1e-5


def _qwen3(**kwargs):
    torch.manual_seed(0)
    model = build_model(50, size="tiny", seed=5, tie_word_embeddings=False, **kwargs)
    for layer in model.model.layers:  # non-trivial norm weights, so a swapped weight would show
        for norm in (layer.input_layernorm, layer.post_attention_layernorm, layer.self_attn.q_norm,
                     layer.self_attn.k_norm):
            norm.weight.data.uniform_(0.5, 1.5)
    return model


def _packed(model, index=0) -> PackedLayer:
    cfg = model.config
    return PackedLayer(model.model.layers[index], heads=cfg.num_attention_heads, kv_heads=cfg.num_key_value_heads,
                       head_dim=cfg.head_dim)


@torch.no_grad()
def test_packed_projections_norms_and_mlp_equal_the_modules(monkeypatch):
    model = _qwen3()
    layer, attn = model.model.layers[0], model.model.layers[0].self_attn
    packed = _packed(model)
    hidden = torch.randn(3, 5, model.config.hidden_size)  # [B, Q, H]
    hq, hkv, d = packed.heads, packed.kv_heads, packed.head_dim
    # the modules' path (HF's decoder layer: input norm, then Qwen3Attention.forward up to RoPE)
    x = layer.input_layernorm(hidden)  # [B, Q, H]
    q = attn.q_norm(attn.q_proj(x).view(3, 5, hq, d))  # [B, Q, Hq, D]
    k = attn.k_norm(attn.k_proj(x).view(3, 5, hkv, d))  # [B, Q, Hkv, D]
    v = attn.v_proj(x).view(3, 5, hkv, d)  # [B, Q, Hkv, D]
    # the packed path: the norm without its weight (W_qkv holds it)
    x_hat = packed.attention_input(hidden)  # [B, Q, H]
    assert torch.allclose(x_hat * layer.input_layernorm.weight, x, rtol=0, atol=0)
    qk, v_packed = packed.project(x_hat)  # [B, Q, Hq + Hkv, D], [B, Q, Hkv, D]
    assert qk.shape == (3, 5, hq + hkv, d)
    assert torch.allclose(qk[:, :, :hq], q, rtol=0, atol=ATOL) and torch.allclose(qk[:, :, hq:], k, rtol=0, atol=ATOL)
    assert torch.allclose(v_packed, v, rtol=0, atol=ATOL)
    # the last-query form: q of the given position only, k and v of every position
    q_last, k_all, v_all = packed.project_last_query(x_hat, x_hat[:, -1:])
    assert q_last.shape == (3, 1, hq, d)
    assert torch.allclose(q_last, q[:, -1:], rtol=0, atol=ATOL) and torch.allclose(k_all, k, rtol=0, atol=ATOL)
    assert torch.allclose(v_all, v, rtol=0, atol=ATOL)
    # hidden + mlp(post_norm(hidden))
    want = hidden + layer.mlp(layer.post_attention_layernorm(hidden))  # [B, Q, H]
    assert torch.allclose(packed.feed_forward(hidden), want, rtol=0, atol=ATOL)
    # a chunk past SPLIT_GATE_UP_AT takes two products (3 x 5 rows x 2 I elements > 1)
    monkeypatch.setattr(packed_layers, "SPLIT_GATE_UP_AT", 1)
    assert torch.allclose(packed.feed_forward(hidden), want, rtol=0, atol=ATOL)


@torch.no_grad()
def test_rope_by_roll_and_the_table_are_hfs_bit_for_bit():
    model = _qwen3()
    positions = torch.tensor([[0, 1, 2, 7], [3, 4, 5, 6]])  # [B, Q]
    cos, sin = model.model.rotary_emb(torch.empty(0), positions)  # [B, Q, D] each
    cos_table, signed_sin = rotary_tables(model, 8)  # [8, D] each
    assert torch.equal(cos_table[positions], cos)
    half = cos.shape[-1] // 2
    # signed sin = [-sin_1 | sin_2]: by hand from the model's sin
    assert torch.equal(signed_sin[positions], torch.cat([-sin[..., :half], sin[..., half:]], dim=-1))
    q, k = torch.randn(2, 4, 4, cos.shape[-1]), torch.randn(2, 2, 4, cos.shape[-1])  # [B, heads, Q, D]
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
    got_q = rope_by_roll(q, cos_table[positions][:, None], signed_sin[positions][:, None])
    got_k = rope_by_roll(k, cos_table[positions][:, None], signed_sin[positions][:, None])
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


def _other_architectures():
    # Qwen2: q/k/v biases, no per-head norms; Llama with every bias (o, gate, up, down too)
    common = dict(vocab_size=50, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(1)
    qwen2 = Qwen2ForCausalLM(Qwen2Config(**common)).float().eval()
    llama = LlamaForCausalLM(LlamaConfig(**common, attention_bias=True, mlp_bias=True)).float().eval()
    for model in (qwen2, llama):
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.data.normal_(0, 0.3)  # HF initialises biases at 0: make them count
    return {"qwen3": _qwen3(), "qwen2": qwen2, "llama": llama}


@pytest.mark.parametrize("gate_up", ["one product", "two products"])
@pytest.mark.parametrize("kernel", ["onednn", "torch"])
def test_the_fast_decoder_equals_the_generic_one_on_three_architectures(kernel, gate_up, monkeypatch):
    # ragged prompts given longest first (the prefill sorts them, so its cache rows come back in order)
    # and a repeated prompt (prefilled once, then copied: a keep right after the prefill)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [5, 6, 7], [20, 21], [5, 6, 7], [30, 31, 32, 33], [40]]

    def fast_decoder_settings():
        monkeypatch.setattr(decoding, "PREFILL_ROWS", 2)
        if gate_up == "two products":  # every feed_forward call past the threshold (Llama's MLP biases too)
            monkeypatch.setattr(packed_layers, "SPLIT_GATE_UP_AT", 1)

    fast_decoder_settings()
    for name, model in _other_architectures().items():
        set_linear_kernel(model, kernel)
        assert decoding.runs_layer_by_layer(model), name
        run = lambda: sample_tokens(model, prompts, temperature=1.0, max_new_tokens=6,
                                    generator=torch.Generator().manual_seed(2))
        fast = run()
        monkeypatch.setattr(sampler, "make_decoder", lambda m, b, s: decoding.HFCacheDecoder(m))
        generic = run()
        monkeypatch.undo()
        fast_decoder_settings()
        assert [t for t, _ in fast] == [t for t, _ in generic], name
        assert max(abs(a - b) for (_, la), (_, lb) in zip(fast, generic) for a, b in zip(la, lb)) <= ATOL, name


def test_a_length_dependent_rope_takes_the_generic_decoder():
    model = _qwen3()
    assert decoding.runs_layer_by_layer(model)
    model.config.rope_parameters = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    assert not decoding.runs_layer_by_layer(model)
    assert isinstance(decoding.make_decoder(model, 2, 8), decoding.HFCacheDecoder)


def test_inference_linear_is_the_autograd_functions_forward_and_records_nothing():
    torch.manual_seed(0)
    layer = set_linear_kernel(torch.nn.Linear(96, 160), "onednn")
    x = torch.randn(7, 91, 96)  # 637 rows x 96 x 160 = 9.8M multiply-adds: on oneDNN (>= 2^20)
    if not isinstance(layer, OneDnnLinear):
        pytest.skip("oneDNN's linear is not used on this machine")
    want = OneDnnLinearFunction.apply(x, layer.weight, layer.bias)  # [7, 91, 160]
    assert torch.equal(inference_linear(x, layer.weight, layer.bias), want)
    with torch.no_grad():
        out = layer(x)
    assert out.grad_fn is None and torch.equal(out, want)
    assert layer(x).grad_fn is not None  # with gradients wanted: the autograd function


@pytest.mark.parametrize("kind", KINDS)
def test_encode_texts_and_decode_rows_equal_the_tokenizers_own_calls(kind):
    corpus = [f"Step {i}:\n#_OX#\nAction {i}: left\n<think>push box</think><action>up</action>" for i in range(30)]
    tok = build_tokenizer(corpus, vocab_size=300, kind=kind)
    texts = ["Step 3:\n#_OX#\n", "<action>up</action> tail", "unseen Words and 123 digits?", "x"]
    want = tok(texts, add_special_tokens=False)["input_ids"]
    assert encode_texts(tok, texts) == want
    rows = [*want, [tok.pad_token_id, *want[0], tok.eos_token_id]]  # special tokens are skipped
    assert decode_rows(tok, rows) == tok.batch_decode(rows, skip_special_tokens=True)
    assert decode_rows(tok, rows, skip_special_tokens=False) == tok.batch_decode(rows, skip_special_tokens=False)


def test_a_tokenizer_without_a_fast_backend_is_called_as_it_is():
    class Plain:  # no backend_tokenizer: what a slow (Python) tokenizer offers
        def __call__(self, texts, add_special_tokens=True):
            return {"input_ids": [[len(t), int(add_special_tokens)] for t in texts]}

        def batch_decode(self, rows, skip_special_tokens=False):
            return [f"{row}{skip_special_tokens}" for row in rows]

    assert encode_texts(Plain(), ["ab", "c"]) == [[2, 0], [1, 0]]
    assert decode_rows(Plain(), [[1]]) == ["[1]True"]
