"""`sdpa_gqa` (arena/lm/attention.py) against HF's "sdpa": the same logits bit for bit, gradients
equal up to float rounding, no per-query-head copy of the keys and values, and a saved model that
plain transformers loads."""
import copy
import json

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM

from arena.lm.attention import ATTENTION
from arena.lm.hf_cache import cache_kwargs, output_cache
from arena.lm.model import build_model, save_checkpoint
from arena.lm.tokenizer import build_tokenizer

V = 40
# left-padded, as the embedded backend's batches: row 0 has 2 pads, row 2 has 4
IDS = torch.tensor([[0, 0, 5, 6, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9], [0, 0, 0, 0, 11, 12, 13]])  # [3, 7]
MASK = (IDS != 0).long()  # [3, 7]
POSITIONS = (MASK.cumsum(-1) - 1).clamp(min=0)  # [3, 7]: real tokens count from 0


def _pair(**dims):
    """The same weights under "sdpa" and under sdpa_gqa (tiny: 4 query heads, 2 key/value heads)."""
    gqa = build_model(V, size="tiny", seed=5, **dims)
    sdpa = copy.deepcopy(gqa)
    sdpa.set_attn_implementation("sdpa")
    assert gqa.config._attn_implementation == ATTENTION and sdpa.config._attn_implementation == "sdpa"
    return sdpa, gqa


def _logits(model, **kw):
    return model(input_ids=IDS, attention_mask=MASK, position_ids=POSITIONS, **kw).logits  # [3, 7, V]


def test_logits_are_bit_identical_to_sdpa_with_a_mask_and_with_a_cache():
    for dims in ({}, {"kv_heads": 4}):  # grouped (G = 2) and not (G = 1)
        sdpa, gqa = _pair(**dims)
        with torch.no_grad():
            assert torch.equal(_logits(sdpa), _logits(gqa))
            # a prompt's cache, then 3 more tokens on top (the shared-prompt pass, logprobs.py)
            tails = []
            for model in (sdpa, gqa):
                head = model(input_ids=IDS[:, :4], attention_mask=MASK[:, :4], position_ids=POSITIONS[:, :4], use_cache=True)
                tail = model(input_ids=IDS[:, 4:], attention_mask=MASK, position_ids=POSITIONS[:, 4:],
                             use_cache=True, **cache_kwargs(output_cache(head)))
                tails.append(tail.logits)  # [3, 3, V]
            assert torch.equal(tails[0], tails[1])


def test_gradients_equal_sdpas_up_to_float_rounding():
    sdpa, gqa = _pair()
    grads = []
    for model in (sdpa, gqa):
        logits = _logits(model)  # [3, 7, V]
        (logits.log_softmax(-1)[MASK.bool()].sum()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))  # [n_params]
    scale = grads[0].abs().max()
    assert scale > 1e-3  # the loss reaches every weight
    # float32 keeps ~7 digits (eps 1.2e-7); a key/value head's gradient sums its G = 2 query
    # heads' parts in another order, an error of a few eps times the gradients' size: 1e-5 * scale
    # is ~100 eps, far below any real difference (a wrong head pairing moves them by O(scale))
    assert (grads[0] - grads[1]).abs().max() <= 1e-5 * scale


def _five_d_copies(model) -> int:
    """aten::copy_ calls on 5-D tensors: repeat_kv's expand [B, Hkv, G, L, D] copied out."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _logits(model).sum().backward()
    return sum(1 for e in prof.events() if e.name == "aten::copy_" and e.input_shapes and len(e.input_shapes[0]) == 5)


def test_no_key_value_copy_per_query_head():
    sdpa, gqa = _pair()
    assert _five_d_copies(sdpa) == 2 * sdpa.config.num_hidden_layers  # keys and values, each layer
    assert _five_d_copies(gqa) == 0


def test_a_saved_model_loads_in_plain_transformers_with_the_same_logits(tmp_path):
    tok = build_tokenizer(["push the box left", "go up and down"], vocab_size=270)
    model = build_model(len(tok), size="tiny", seed=2, pad_token_id=tok.pad_token_id)
    path = save_checkpoint(model, tok, tmp_path / "ckpt")
    assert "sdpa_gqa" not in json.dumps(json.loads((path / "config.json").read_text()))
    plain = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32).eval()
    ids = IDS.clamp(max=len(tok) - 1)  # [3, 7]
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=MASK, position_ids=POSITIONS).logits  # [3, 7, V']
        theirs = plain(input_ids=ids, attention_mask=MASK, position_ids=POSITIONS).logits  # [3, 7, V']
    assert plain.config._attn_implementation != ATTENTION
    assert torch.equal(ours, theirs)
