"""The shared-prompt pass of arena/lm/logprobs.py: each distinct prompt runs once, its keys and
values are copied to the rows that use it, and the responses run on top. Log-probs, entropies and
gradients equal the one-pass ones up to float rounding; the micro-batch sort key puts repeats side
by side (arena/lm/micro_batches.py, sort_keys)."""
import pytest
import torch

from arena.lm.logprobs import SHARE_AT_MOST, distinct_prompts, token_logprobs_and_entropy
from arena.lm.micro_batches import sort_keys
from arena.lm.model import build_model

pytestmark = pytest.mark.usefixtures("one_thread")
V = 50
# float32 tolerance of the same tiny model's numbers summed in another order (test_fast_step.py's
# LOGP_ATOL and its derivation); gradients are sums over ~40 rows of such terms, each O(1), so
# their rounding stays under 1e-4 while a dropped or doubled row moves them by O(1).
LOGP_ATOL = 1e-5
GRAD_ATOL = 1e-4


def test_distinct_prompts_in_order_of_first_appearance():
    # rows: a, b, a, c, b  -> distinct a (row 0), b (row 1), c (row 3); source maps each row to them
    a, b, c = [0, 5, 6], [0, 7, 8], [9, 9, 9]
    ids = torch.tensor([a, b, a, c, b])
    mask = torch.tensor([[0, 1, 1]] * 3 + [[1, 1, 1]] * 2)  # row 4 is b with another mask: distinct
    first, source = distinct_prompts(ids, mask)
    # by (ids, mask): a0, b1, a2(=a0), c3, b'4 (mask differs from b1) -> 4 distinct
    assert first.tolist() == [0, 1, 3, 4]
    assert source.tolist() == [0, 1, 0, 2, 3]


def test_an_empty_batch_has_no_distinct_prompts_and_no_keys():
    ids, mask = torch.zeros(0, 5, dtype=torch.long), torch.zeros(0, 5, dtype=torch.long)
    first, source = distinct_prompts(ids, mask)
    assert first.shape == (0,) and source.shape == (0,)
    assert sort_keys(ids, mask, torch.zeros(0, 3)).shape == (0,)


def test_sort_keys_order_by_prompt_length_then_prompt_then_reply_length():
    # N = 4, T = 3. Rows (prompt length, distinct prompt, reply length):
    #   0: (2, g0, 3)  1: (3, g1, 1)  2: (2, g0, 1)  3: (2, g2, 2)
    # key = (p_len * N + g) * (T + 1) + r_len:
    #   0: (8 + 0) * 4 + 3 = 35   1: (12 + 1) * 4 + 1 = 53   2: (8 + 0) * 4 + 1 = 33   3: (8 + 2) * 4 + 2 = 42
    ids = torch.tensor([[0, 4, 5], [6, 7, 8], [0, 4, 5], [0, 9, 9]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [0, 1, 1]])
    reply = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=torch.float)
    keys = sort_keys(ids, mask, reply)
    assert keys.tolist() == [35, 53, 33, 42]
    assert torch.argsort(keys).tolist() == [2, 0, 3, 1]  # rows of prompt g0 side by side


def _batch(n_rows: int, n_prompts: int, seed: int = 0):
    """n_rows rows drawing their prompts from n_prompts distinct left-padded prompts of 4..12
    tokens; replies of 1..5 tokens, right-padded."""
    g = torch.Generator().manual_seed(seed)
    width, reply = 12, 5
    base = torch.randint(3, V, (n_prompts, width), generator=g)  # [K, P]
    base_len = torch.randint(4, width + 1, (n_prompts,), generator=g)  # [K]
    pick = torch.randint(0, n_prompts, (n_rows,), generator=g)  # [N]
    mask = (torch.arange(width)[None, :] >= (width - base_len[pick])[:, None]).long()  # [N, P]
    ids = torch.where(mask.bool(), base[pick], torch.zeros_like(base[pick]))  # [N, P]
    r_len = torch.randint(1, reply + 1, (n_rows,), generator=g)  # [N]
    r_mask = (torch.arange(reply)[None, :] < r_len[:, None]).float()  # [N, T]
    r_ids = torch.where(r_mask.bool(), torch.randint(3, V, (n_rows, reply), generator=g), 0)  # [N, T]
    return ids, mask, r_ids, r_mask


def _forward_calls(model):
    # one entry per pass through the model: every pass embeds its tokens once, whether it runs
    # the model's own forward or the trimmed last layer (arena/lm/last_positions.py)
    calls = []
    model.get_input_embeddings().register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize("seed", [0, 1])
def test_shared_prompt_pass_equals_one_pass_with_gradients(seed):
    model = build_model(V, size="tiny", seed=seed).train()
    ids, mask, r_ids, r_mask = _batch(40, 8, seed)
    assert distinct_prompts(ids, mask)[0].shape[0] <= 8  # at most 8 of 40 distinct: the shared pass runs
    calls = _forward_calls(model)
    results = []
    for share in (False, True):
        model.zero_grad()
        logp, ent = token_logprobs_and_entropy(model, ids, mask, r_ids, r_mask, share_prompts=share)  # [N, T] x2
        (logp.sum() + 0.1 * ent.sum()).backward()
        results.append((logp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]))
    assert len(calls) == 3  # one pass, then prompts + responses
    (logp0, ent0, grads0), (logp1, ent1, grads1) = results
    assert torch.allclose(logp0, logp1, atol=LOGP_ATOL, rtol=0)
    assert torch.allclose(ent0, ent1, atol=LOGP_ATOL, rtol=0)
    assert (logp0[r_mask == 0] == 0).all() and (logp1[r_mask == 0] == 0).all()
    for g0, g1 in zip(grads0, grads1):
        assert torch.allclose(g0, g1, atol=GRAD_ATOL, rtol=0)
    assert max(g.abs().max() for g in grads0) > 0.1  # a real gradient, not a zero one


def test_a_wrong_copy_would_be_seen():
    # The tolerance can fail: the same rows with one row's prompt swapped for another's differ by
    # far more than LOGP_ATOL.
    model = build_model(V, size="tiny", seed=0).eval()
    ids, mask, r_ids, r_mask = _batch(40, 8, 0)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(model, ids, mask, r_ids, r_mask, share_prompts=True)
        other = (ids[:, -1] != ids[0, -1]).nonzero()[0, 0]  # a row whose prompt differs from row 0's
        ids2, mask2 = ids.clone(), mask.clone()
        ids2[0], mask2[0] = ids[other], mask[other]
        logp2, _ = token_logprobs_and_entropy(model, ids2, mask2, r_ids, r_mask, share_prompts=True)
    assert (logp[0] - logp2[0]).abs().max() > 100 * LOGP_ATOL


def test_few_repeats_take_the_one_pass():
    # 20 rows with 19 distinct prompts: 19 > SHARE_AT_MOST * 20 = 18, so one pass (one forward call)
    model = build_model(V, size="tiny", seed=0).eval()
    ids, mask, r_ids, r_mask = _batch(20, 400, 3)
    ids[1], mask[1] = ids[0], mask[0]
    n_distinct = distinct_prompts(ids, mask)[0].shape[0]
    assert n_distinct > SHARE_AT_MOST * 20
    calls = _forward_calls(model)
    with torch.no_grad():
        token_logprobs_and_entropy(model, ids, mask, r_ids, r_mask, share_prompts=True)
    assert len(calls) == 1
