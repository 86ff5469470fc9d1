"""The embedded backend's model: sizes, seeded init, checkpoint round trip."""
import os

import pytest
import torch

from arena.lm.model import (
    SIZES,
    build_model,
    count_parameters,
    load_model,
    resolve_device,
    save_checkpoint,
)
from arena.lm.tokenizer import build_tokenizer

CORPUS = ["#####\n#_OX#\n<think>push box left</think><action>left</action>"] * 4


pytestmark = pytest.mark.usefixtures("one_thread")


def test_tiny_parameter_count_by_hand():
    # tiny: V=1024, H=64, 2 layers, 4 heads x 16 dims, 2 KV heads, MLP 192, tied embeddings.
    # per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 = 12288; q_norm+k_norm 16+16 = 32;
    #            MLP 3*64*192 = 36864; two RMSNorms 2*64 = 128  -> 49312
    # total: 2*49312 + embedding 1024*64 (shared with lm_head) + final norm 64 = 164224
    model = build_model(1024, size="tiny")
    assert count_parameters(model) == 164224
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert next(model.parameters()).dtype == torch.float32


def test_default_is_small_and_under_one_million_parameters():
    model = build_model(1024)
    assert model.config.hidden_size == SIZES["small"]["hidden"]
    assert count_parameters(model) < 1_000_000
    assert model.config._attn_implementation == "sdpa_gqa"


def test_explicit_dimensions_override_the_size():
    model = build_model(50, size="tiny", hidden=32, layers=3, heads=2, kv_heads=1, intermediate=40, max_positions=128)
    c = model.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == (32, 3, 2, 1)
    assert (c.intermediate_size, c.head_dim, c.max_position_embeddings, c.vocab_size) == (40, 16, 128, 50)


def test_init_depends_only_on_the_seed_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = build_model(100, size="tiny", seed=7)
    assert torch.equal(torch.rand(1), expected_next)  # global RNG untouched
    b = build_model(100, size="tiny", seed=7)
    c = build_model(100, size="tiny", seed=8)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.model.layers[0].mlp.up_proj.weight, c.model.layers[0].mlp.up_proj.weight)


def test_eager_and_sdpa_give_the_same_logits():
    ids = torch.tensor([[0, 0, 5, 6, 7], [8, 9, 10, 11, 12]])  # [2, 5]
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # [2, 5]
    with torch.no_grad():
        sdpa = build_model(20, size="tiny", attn_implementation="sdpa")(input_ids=ids, attention_mask=mask).logits
        eager = build_model(20, size="tiny", attn_implementation="eager")(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert torch.allclose(sdpa[real], eager[real], atol=1e-5, rtol=0)


def test_checkpoint_round_trip_gives_identical_logits(tmp_path):
    tok = build_tokenizer(CORPUS, vocab_size=270)
    model = build_model(len(tok), size="tiny", seed=3, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    path = save_checkpoint(model, tok, tmp_path / "ckpt")
    assert (path / "config.json").is_file() and (path / "tokenizer.json").is_file()
    loaded, tok2 = load_model(path)
    ids = torch.tensor([tok.encode(CORPUS[0], add_special_tokens=False)])  # [1, L]
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, loaded(input_ids=ids).logits)
    assert tok2.encode(CORPUS[0], add_special_tokens=False) == ids[0].tolist()
    assert loaded.config.pad_token_id == tok.pad_token_id


def test_save_checkpoint_replaces_atomically_and_leaves_no_temp_dirs(tmp_path):
    tok = build_tokenizer(CORPUS, vocab_size=270)
    save_checkpoint(build_model(len(tok), size="tiny", seed=1), tok, tmp_path / "ckpt")
    second = build_model(len(tok), size="tiny", seed=2)
    save_checkpoint(second, tok, tmp_path / "ckpt")
    assert os.listdir(tmp_path) == ["ckpt"]
    loaded, _ = load_model(tmp_path / "ckpt")
    assert torch.equal(loaded.model.embed_tokens.weight, second.model.embed_tokens.weight)


def test_saved_checkpoint_has_the_umask_modes_not_mkdtemps_0700(tmp_path):
    # umask 022: a folder gets 0o777 & ~0o022 = 0o755, a file 0o666 & ~0o022 = 0o644, as mkdir
    # and open would give; mkdtemp alone leaves the folder 0o700 (unreadable to a lab's group)
    tok = build_tokenizer(CORPUS, vocab_size=270)
    old = os.umask(0o022)
    try:
        path = save_checkpoint(build_model(len(tok), size="tiny", seed=1), tok, tmp_path / "ckpt")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o755
    files = [p for p in path.rglob("*") if p.is_file()]
    assert files and {p.stat().st_mode & 0o777 for p in files} == {0o644}


def test_user_errors_list_the_choices(tmp_path):
    with pytest.raises(ValueError, match="tiny, small, medium"):
        build_model(10, size="huge")
    with pytest.raises(ValueError, match="sdpa_gqa, sdpa, eager"):
        build_model(10, attn_implementation="flash")
    with pytest.raises(ValueError, match="config.json"):
        load_model(tmp_path)
    with pytest.raises(ValueError, match="cpu, cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="valid devices here: cpu"):
            resolve_device("cuda")
    assert resolve_device() == torch.device("cpu")
