"""arena/lm/last_positions.py: logits at the last k positions with the last decoder layer run only
there. The logits equal the model's own forward (logits_to_keep=k) up to float rounding, with and
without padding, with a cache (the shared-prompt pass's head) and under grad; the last layer's MLP
really sees k positions; models it cannot trim run their own forward."""
import pytest
import torch

from arena.lm.decoding import prompt_positions
from arena.lm.hf_cache import cache_kwargs
from arena.lm.last_positions import last_logits, trims
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.model import build_model

pytestmark = pytest.mark.usefixtures("one_thread")
V = 50
# float32 rounding of the same numbers through matmuls over another number of rows (the tiny
# model's logits are O(1); test_shared_prompts.py's LOGP_ATOL and GRAD_ATOL and their derivation)
ATOL = 1e-5
GRAD_ATOL = 1e-4


def _left_padded(seed: int = 0):
    # 5 rows, S = 9: real lengths 9, 4, 7, 1, 9 (left padding), random ids in 1..V-1
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([9, 4, 7, 1, 9])
    mask = (torch.arange(9)[None, :] >= 9 - lengths[:, None]).long()  # [5, 9]
    ids = torch.randint(1, V, (5, 9), generator=g) * mask  # [5, 9]
    return ids, mask


def _model(size: str = "tiny", attention: str | None = None):
    torch.manual_seed(0)
    model = build_model(V, size=size)
    if attention is not None:
        model.set_attn_implementation(attention)
    return model.eval()


@pytest.mark.parametrize("keep", [1, 3, 8])
@pytest.mark.parametrize("padded", [True, False])
def test_logits_equal_the_models_own_forward(keep, padded):
    model = _model("small")  # 4 layers: the first three run as HF's, the last one trimmed
    ids, mask = _left_padded()
    if not padded:  # no padding: HF passes no mask and the trimmed layer builds its causal block
        mask = torch.ones_like(mask)
    positions = prompt_positions(mask)  # [5, 9]
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits  # [5, k, V]
        got, cache = last_logits(model, ids, mask, positions, keep)  # [5, k, V]
    assert trims(model) and cache is None
    assert got.shape == want.shape == (5, keep, V)
    assert torch.allclose(got, want, rtol=0, atol=ATOL)


def test_the_cache_holds_every_positions_keys_so_a_second_pass_on_top_is_exact():
    # head: prompts with keep=1 and a cache; tail: 3 more tokens on top through the cache. The
    # tail's logits equal one pass over prompt ++ tail, so the last layer's cache rows are whole.
    model = _model()
    ids, mask = _left_padded(1)
    tail = torch.randint(1, V, (5, 3), generator=torch.Generator().manual_seed(2))  # [5, 3]
    full_mask = torch.cat([mask, torch.ones(5, 3, dtype=torch.long)], dim=1)  # [5, 12]
    positions = prompt_positions(full_mask)  # [5, 12]
    with torch.no_grad():
        head, cache = last_logits(model, ids, mask, positions[:, :9], 1, use_cache=True)  # [5, 1, V]
        on_top = model(input_ids=tail, attention_mask=full_mask, position_ids=positions[:, 9:],
                       use_cache=True, logits_to_keep=3, **cache_kwargs(cache)).logits  # [5, 3, V]
        one_pass = model(input_ids=torch.cat([ids, tail], dim=1), attention_mask=full_mask, position_ids=positions,
                         logits_to_keep=4).logits  # [5, 4, V]
    assert torch.allclose(head[:, 0], one_pass[:, 0], rtol=0, atol=ATOL)
    assert torch.allclose(on_top, one_pass[:, 1:], rtol=0, atol=ATOL)


def test_the_last_layers_mlp_runs_on_the_kept_positions_only():
    model = _model()
    ids, mask = _left_padded()
    seen = []
    hook = model.model.layers[-1].mlp.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[1]))
    try:
        with torch.no_grad():
            last_logits(model, ids, mask, prompt_positions(mask), 2)
            last_logits(model, ids, mask, prompt_positions(mask), 2, trim=False)
    finally:
        hook.remove()
    assert seen == [2, 9]  # trimmed: 2 of the 9 positions; untrimmed: all of them


@pytest.mark.parametrize("share", [False, True])
def test_log_probs_and_gradients_equal_the_untrimmed_ones(share):
    # token_logprobs_and_entropy over prompt ++ reply (rows 0 and 3 share a prompt, for the
    # shared-prompt pass), trimmed or not: log-probs and one backward's gradients agree
    model = _model()
    prompt_ids, prompt_mask = _left_padded(3)
    prompt_ids[3], prompt_mask[3] = prompt_ids[0], prompt_mask[0]
    prompt_ids[4], prompt_mask[4] = prompt_ids[1], prompt_mask[1]
    reply_mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).float()  # [5, 4]
    reply_ids = torch.randint(1, V, (5, 4), generator=torch.Generator().manual_seed(4)) * reply_mask.long()  # [5, 4]
    out = []
    for trim in (False, True):
        model.zero_grad()
        logp, ent = token_logprobs_and_entropy(model, prompt_ids, prompt_mask, reply_ids, reply_mask,
                                               share_prompts=share, trim_last_layer=trim)  # [5, 4] each
        (logp.sum() + 0.1 * ent.sum()).backward()
        out.append((logp.detach(), ent.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])))
    (logp0, ent0, grad0), (logp1, ent1, grad1) = out
    assert torch.allclose(logp1, logp0, rtol=0, atol=ATOL) and torch.allclose(ent1, ent0, rtol=0, atol=ATOL)
    assert grad0.abs().max() > 0.1  # a real gradient, so the comparison below can fail
    assert torch.allclose(grad1, grad0, rtol=0, atol=GRAD_ATOL)


def test_a_model_it_cannot_trim_runs_its_own_forward():
    # eager attention takes an additive float mask, not the boolean one the trimmed layer slices
    model = _model(attention="eager")
    ids, mask = _left_padded()
    seen = []
    hook = model.model.layers[-1].mlp.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[1]))
    try:
        with torch.no_grad():
            got, _ = last_logits(model, ids, mask, prompt_positions(mask), 2)
            want = model(input_ids=ids, attention_mask=mask, position_ids=prompt_positions(mask), logits_to_keep=2).logits
    finally:
        hook.remove()
    assert not trims(model) and seen == [9, 9]
    assert torch.equal(got, want)


def test_the_samplers_prefill_runs_the_last_layer_at_the_last_position_only():
    # StaticCacheDecoder.prefill with and without trim_prefill: the same next-token logits and the
    # same cache (decode steps on top agree too); the trimmed last layer's MLP sees 1 position
    # (the packed layers run their MLP in decoding.feed_forward: watched for the last layer)
    import arena.lm.decoding as decoding
    from tests.lm.last_layer_mlp import last_layer_mlp_widths

    model = _model()
    ids, mask = _left_padded(5)
    out = []
    with last_layer_mlp_widths(model) as seen, torch.no_grad():
        for trim in (True, False):
            decoder = decoding.make_decoder(model, 5, 12, trim_prefill=trim)
            first = decoder.prefill(ids, mask)  # [5, V]
            nxt = decoder.step(first.argmax(-1), mask.sum(1))  # [5, V]
            out.append((first, nxt))
    # one prefill chunk (5 rows <= PREFILL_ROWS) cut to its longest prompt (9), then one decode step
    assert seen == [1, 1, 9, 1]
    (first_t, next_t), (first_f, next_f) = out
    assert torch.allclose(first_t, first_f, rtol=0, atol=ATOL) and torch.allclose(next_t, next_f, rtol=0, atol=ATOL)
