"""Micro-batches sorted by length and trimmed to their own padding (sort_micro_batches=true):
the same log-probs and the same update as the default contiguous, full-width micro-batches."""
import pytest
import torch

from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.micro_batches import micro_batch_rows, padding_bounds, row_lengths, take
from arena.lm.model import build_model
from arena.backends.embedded.trainer import fill_logprobs
from arena.backends.embedded.update import ppo_update
from arena.po.compose import resolve
from arena.po.types import make_batch

from .test_update import TableModel, _batch, table_logprobs

pytestmark = pytest.mark.usefixtures("one_thread")


def _masks():
    # 4 rows, prompts left-padded to P = 4, replies right-padded to T = 3:
    #   row 0: prompt 2, reply 1 -> length 3     row 2: prompt 1, reply 2 -> length 3
    #   row 1: prompt 4, reply 3 -> length 7     row 3: prompt 3, reply 1 -> length 4
    prompt = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1]])
    reply = torch.tensor([[1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0]]).float()
    return prompt, reply


def test_rows_sorted_by_length_then_cut_by_hand():
    prompt, reply = _masks()
    lengths = row_lengths(prompt, reply)
    assert lengths.tolist() == [3, 7, 3, 4]
    # stable sort: 3 (row 0), 3 (row 2), 4 (row 3), 7 (row 1); size 2 -> [0, 2], [3, 1]
    assert [u.tolist() for u in micro_batch_rows(slice(0, 4), 2, lengths)] == [[0, 2], [3, 1]]
    # within a mini-batch (rows 1-3) the indices are the batch's: 3 (row 2), 4 (row 3), 7 (row 1)
    assert [u.tolist() for u in micro_batch_rows(slice(1, 4), 2, lengths)] == [[2, 3], [1]]
    # without lengths: contiguous slices, the last one short
    assert micro_batch_rows(slice(4, 10), 4) == [slice(4, 8), slice(8, 10)]
    # rows [0, 2]: prompt columns 2-3 hold real tokens (row 0), so first = 2; replies end at
    # column 1 (row 2), so last = 2. Rows [3, 1]: row 1 is full, nothing trims.
    assert padding_bounds(prompt[[0, 2]], reply[[0, 2]]) == (2, 2)
    assert padding_bounds(prompt[[3, 1]], reply[[3, 1]]) == (0, 3)


def _real_batch(n=12, seed=0):
    """A batch of n rows of varied prompt (1..20) and reply (1..6) lengths for a real model."""
    g = torch.Generator().manual_seed(seed)
    P, T, V = 20, 6, 50
    p_len = torch.randint(1, P + 1, (n,), generator=g)  # [n]
    r_len = torch.randint(1, T + 1, (n,), generator=g)  # [n]
    b = make_batch(group_id=[i // 4 for i in range(n)], traj_id=list(range(n)), turn_idx=[0] * n,
                   turn_reward=[0.0] * n, episode_return=[0.0] * n, score=[0.0] * n, format_valid=[True] * n,
                   action_valid=[True] * n, won=[False] * n)
    b.prompt_mask = (torch.arange(P)[None, :] >= (P - p_len)[:, None]).long()  # [n, P] left-padded
    b.prompt_ids = torch.randint(1, V, (n, P), generator=g) * b.prompt_mask  # [n, P]
    b.response_mask = (torch.arange(T)[None, :] < r_len[:, None]).float()  # [n, T] right-padded
    b.response_ids = (torch.randint(1, V, (n, T), generator=g) * b.response_mask).long()  # [n, T]
    return b, torch.randn(n, generator=g)


def test_fill_logprobs_sorted_and_trimmed_equals_full_width():
    torch.manual_seed(0)
    model, ref = build_model(64, size="tiny"), build_model(64, size="tiny", seed=1)
    full, _ = _real_batch()
    fill_logprobs(model, ref, full, micro_batch_size=5)
    short, _ = _real_batch()
    fill_logprobs(model, ref, short, micro_batch_size=5, sort_micro_batches=True)
    for name in ("old_logp", "entropy", "ref_logp"):
        a, b = getattr(full, name), getattr(short, name)
        assert a.shape == b.shape == full.response_mask.shape
        assert torch.allclose(a, b, atol=1e-5), name
        assert not b[full.response_mask == 0].any()  # padding stays 0
    # the reference is another model: the check above compared something non-trivial
    assert not torch.allclose(full.old_logp, full.ref_logp, atol=1e-3)


def test_take_trims_per_token_tensors_with_the_reply():
    batch, _ = _real_batch()
    batch.old_logp = torch.randn(batch.response_mask.shape)  # [n, T]
    batch.ref_logp = None
    rows = torch.tensor([0, 3])
    m = take(batch, rows, trim=True)
    first, last = padding_bounds(batch.prompt_mask[rows], batch.response_mask[rows])
    assert m.prompt_ids.shape == (2, batch.prompt_ids.shape[1] - first)
    assert m.response_mask.shape == m.old_logp.shape == (2, last)
    assert torch.equal(m.old_logp, batch.old_logp[rows][:, :last]) and m.ref_logp is None
    assert take(batch, slice(0, 2), trim=False).response_ids.shape == (2, batch.response_ids.shape[1])


def _table_batch():
    # test_update's batch with replies of 1..5 tokens, so that trimming changes T'
    return _batch(n=9, T=5, seed=3)


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"])
@pytest.mark.parametrize("method", ["grpo", "gspo", "sapo"])
def test_sorted_micro_batches_reproduce_the_default_update(method, agg):
    # Under global denominators sum_u L_u = L_b whatever rows share a micro-batch, and the
    # horizon H of seq_mean_token_sum_norm stays the batch's padded T (5), not a micro-batch's T'.
    po = resolve({"method": method, "aggregation": agg, "seq_mask": "none"})
    # Every actor/* metric is the mini-batch's own too (means and shares pooled by their tokens,
    # counts summed), so the step's metrics do not depend on the split either.
    ws, runs = [], []
    for sort, micro in ((False, 256), (True, 2), (True, 3)):
        batch, adv = _table_batch()
        model = TableModel()
        metrics = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.5), po, batch, adv, table_logprobs,
                             num_mini_batches=2, micro_batch_size=micro, sort_micro_batches=sort,
                             kl_coef=0.01, entropy_coef=0.001, grad_clip=1e9)
        ws.append(model.w.detach().clone())
        runs.append(metrics)
    for w, metrics in zip(ws[1:], runs[1:]):
        assert torch.allclose(w, ws[0], rtol=0, atol=1e-12)
        assert metrics.keys() == runs[0].keys()
        for key, value in runs[0].items():
            assert metrics[key] == pytest.approx(value, abs=1e-12), key
    assert not torch.equal(ws[0], TableModel().w.detach())  # the update did something


def test_sorting_refuses_per_microbatch_denominators():
    batch, adv = _table_batch()
    model = TableModel()
    with pytest.raises(ValueError, match="po.agg_norm=global"):
        ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.5), resolve({"method": "grpo", "agg_norm": "per_microbatch"}),
                   batch, adv, table_logprobs, micro_batch_size=2, sort_micro_batches=True)


def test_real_model_update_is_the_same_sorted_or_not():
    # one optimizer step of the tiny transformer: parameters agree to float32 rounding
    po = resolve({"method": "grpo"})
    params = []
    for sort, micro in ((False, 256), (True, 4)):
        torch.manual_seed(0)
        model = build_model(64, size="tiny")
        batch, adv = _real_batch()
        fill_logprobs(model, None, batch, micro, sort)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ppo_update(model, opt, po, batch, adv, token_logprobs_and_entropy, num_mini_batches=2,
                   micro_batch_size=micro, sort_micro_batches=sort, grad_clip=1e9)
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.manual_seed(0)
    start = torch.cat([p.detach().flatten() for p in build_model(64, size="tiny").parameters()])
    moved = (params[0] - start).abs().max()
    assert moved > 1e-4  # the step moved the weights ...
    assert (params[1] - params[0]).abs().max() < 1e-3 * moved  # ... and the two agree far closer than that
