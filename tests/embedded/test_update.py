"""ppo_update bookkeeping: mini-batch split, exact gradient accumulation, on-policy shortcut."""
import math

import pytest
import torch

from arena.backends.embedded.update import ppo_update
from arena.po.batching import mini_batch_slices
from arena.po.compose import resolve
from arena.po.types import make_batch


def test_mini_batch_slices():
    # 10 rows in 4 near-equal parts: bounds round(i*10/4) = 0, 2(2.5 rounds to 2), 5, 8(7.5->8), 10
    assert mini_batch_slices(10, num_mini_batches=4, mini_batch_size=None) == [slice(0, 2), slice(2, 5), slice(5, 8), slice(8, 10)]
    # an explicit size in turn-samples wins: 10 rows of 4 -> 4, 4, 2
    assert mini_batch_slices(10, num_mini_batches=4, mini_batch_size=4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert mini_batch_slices(3, num_mini_batches=8, mini_batch_size=None) == [slice(0, 1), slice(1, 2), slice(2, 3)]


class TableModel(torch.nn.Module):
    """logp(token | nothing) = log_softmax(W)[token]: a policy whose gradients are easy to compare."""

    def __init__(self, vocab=6):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, vocab, dtype=torch.float64))


def table_logprobs(model, prompt_ids, prompt_mask, response_ids, response_mask):
    logp_all = torch.log_softmax(model.w, -1)  # [V]
    logp = logp_all[response_ids] * response_mask  # [n, T]
    ent = -(logp_all.exp() * logp_all).sum().expand_as(logp) * response_mask  # [n, T]
    return logp, ent


def _batch(n=7, T=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).double()  # [n, T]
    b = make_batch(group_id=[0] * n, traj_id=list(range(n)), turn_idx=[0] * n, turn_reward=[0.0] * n,
                   episode_return=[0.0] * n, score=[0.0] * n, format_valid=[True] * n, action_valid=[True] * n, won=[False] * n)
    b.prompt_ids = torch.zeros(n, 1, dtype=torch.long)
    b.prompt_mask = torch.ones(n, 1, dtype=torch.long)
    b.response_ids = torch.randint(0, 6, (n, T), generator=g)
    b.response_mask = mask
    b.old_logp = (torch.randn(n, T, generator=g, dtype=torch.float64) * 0.1 - 1.8) * mask
    b.ref_logp = (torch.randn(n, T, generator=g, dtype=torch.float64) * 0.1 - 1.8) * mask
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    return b, adv


@pytest.mark.parametrize("method", ["grpo", "grpo_st", "gspo", "cispo_sm", "sapo"])
@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"])
def test_micro_batches_reproduce_the_full_mini_batch_update(method, agg):
    # Global counts make sum_u L_u = L_b, so the parameters after one SGD step must not depend
    # on the micro-batch size (1, 2, 3 or all 7 rows).
    mask = {"hp": {"seq_mask_delta": 0.0}} if method == "cispo_sm" else {"seq_mask": "none"}
    po = resolve({"method": method, "aggregation": agg, **mask})
    results = []
    for micro in (7, 3, 2, 1):
        batch, adv = _batch()
        model = TableModel()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        ppo_update(model, opt, po, batch, adv, table_logprobs, num_mini_batches=2, micro_batch_size=micro,
                   kl_coef=0.01, entropy_coef=0.001, grad_clip=1e9)
        results.append(model.w.detach().clone())
    for w in results[1:]:
        assert torch.allclose(w, results[0], rtol=0, atol=1e-14)
    assert not torch.equal(results[0], TableModel().w.detach())  # the update did something


def test_per_microbatch_norm_depends_on_micro_batch_size():
    # The authors' mean of micro-batch means is NOT invariant (docs/design.md §A): the update changes.
    po = resolve({"method": "grpo", "agg_norm": "per_microbatch"})
    ws = []
    for micro in (7, 2):
        batch, adv = _batch()
        model = TableModel()
        ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.5), po, batch, adv, table_logprobs,
                   num_mini_batches=1, micro_batch_size=micro, grad_clip=1e9)
        ws.append(model.w.detach().clone())
    assert not torch.allclose(ws[0], ws[1], atol=1e-9)


def test_on_policy_shortcut_makes_the_ratio_one():
    # One mini-batch, one epoch: old := stopgrad(logp), so no token is clipped even though the
    # stored old_logp is far from the model's log-probs.
    batch, adv = _batch()
    batch.old_logp = batch.old_logp - 5.0 * batch.response_mask
    model = TableModel()
    m = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.1), resolve({"method": "grpo"}), batch, adv,
                   table_logprobs, num_mini_batches=1, grad_clip=1e9)
    assert m["actor/clipfrac_high"] == 0.0 and m["actor/clipfrac_low"] == 0.0 and m["actor/off_policy_kl"] == 0.0
    assert m["actor/updates_per_step"] == 1.0
    # two mini-batches: the stored old_logp is used and the far-off ratios are clipped
    m2 = ppo_update(TableModel(), torch.optim.SGD(model.parameters(), lr=0.1), resolve({"method": "grpo"}), batch, adv,
                    table_logprobs, num_mini_batches=2, grad_clip=1e9)
    assert m2["actor/updates_per_step"] == 2.0 and m2["actor/clipfrac_high"] > 0.0


def _clip_batch():
    # 4 rows, one reply token each (token 0), A = [-1, -1, -1, +1]. With the TableModel's
    # logp0 = log_softmax(w)[0], old_logp = logp0 - log(r) gives each row the ratio r:
    #   r = [0.5, 1.0, 1.0, 1.5]; GRPO's band is [1 - 0.2, 1 + 0.2] = [0.8, 1.2].
    logp0 = torch.log_softmax(TableModel().w.detach(), -1)[0]
    ratio = torch.tensor([0.5, 1.0, 1.0, 1.5], dtype=torch.float64)
    b = make_batch(group_id=[0] * 4, traj_id=list(range(4)), turn_idx=[0] * 4, turn_reward=[0.0] * 4,
                   episode_return=[0.0] * 4, score=[0.0] * 4, format_valid=[True] * 4, action_valid=[True] * 4,
                   won=[False] * 4)
    b.prompt_ids = torch.zeros(4, 1, dtype=torch.long)
    b.prompt_mask = torch.ones(4, 1, dtype=torch.long)
    b.response_ids = torch.zeros(4, 1, dtype=torch.long)
    b.response_mask = torch.ones(4, 1, dtype=torch.float64)
    b.old_logp = (logp0 - ratio.log())[:, None]  # [4, 1]
    b.ref_logp = None
    return b, torch.tensor([-1.0, -1.0, -1.0, 1.0], dtype=torch.float64)


@pytest.mark.parametrize("micro", [4, 2, 1])
def test_clip_fractions_are_shares_of_the_mini_batch_whatever_the_micro_batches(micro):
    # By hand, over the mini-batch: 4 valid tokens, row 0 below the band, row 3 above it;
    # A < 0 on rows 0-2 (one of them below: 1/3), A > 0 on row 3 (above: 1/1). So
    #   clipfrac_low = 1/4, clipfrac_high = 1/4, clipfrac_neg_adv = 1/3, clipfrac_pos_adv = 1.
    # Micro-batches of 2 are {0, 1} and {2, 3}: a share weighted by valid tokens (2/4 each) would
    # give clipfrac_neg_adv = 1/2 * 2/4 + 0/1 * 2/4 = 1/4 and clipfrac_pos_adv = 1 * 2/4 = 1/2;
    # pooled by their own tokens (A < 0: 2 and 1; A > 0: 0 and 1) they give 1/3 and 1.
    # lr = 0 keeps the weights, so both epochs (no on-policy shortcut) see the same ratios.
    po = resolve({"method": "grpo"})
    batch, adv = _clip_batch()
    model = TableModel()
    metrics = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.0), po, batch, adv, table_logprobs,
                         num_mini_batches=1, ppo_epochs=2, micro_batch_size=micro, grad_clip=1e9)
    assert metrics["actor/clipfrac_low"] == pytest.approx(1 / 4, abs=1e-12)
    assert metrics["actor/clipfrac_high"] == pytest.approx(1 / 4, abs=1e-12)
    assert metrics["actor/clipfrac_neg_adv"] == pytest.approx(1 / 3, abs=1e-12)
    assert metrics["actor/clipfrac_pos_adv"] == pytest.approx(1.0, abs=1e-12)
    # off_policy_kl = mean(old - logp) = mean(-log r) = -(log 0.5 + log 1.5) / 4
    assert metrics["actor/off_policy_kl"] == pytest.approx(-(math.log(0.5) + math.log(1.5)) / 4, abs=1e-12)


def test_micro_batch_metrics_merge_by_their_declared_kind():
    # two micro-batches; entropy is a mean (kind "mean"): (1.0 * 3 tokens + 3.0 * 1 token) / 4 = 1.5;
    # masked_seqs is a count: 2 + 1 = 3; pg_loss is sum_u s * pg_u = 0.5 * 0.5 + 0.5 * 1.5 = 1.0
    from arena.backends.embedded.update import MicroResult, merge_micro_batches
    from arena.metric_keys import COUNT, MEAN, MICRO_BATCH_KINDS

    assert (MICRO_BATCH_KINDS["actor/entropy"], MICRO_BATCH_KINDS["actor/masked_seqs"]) == (MEAN, COUNT)
    results = [MicroResult({"actor/entropy": 1.0, "actor/masked_seqs": 2.0}, {"actor/entropy": 3.0, "actor/masked_seqs": 3.0}, 0.5, None),
               MicroResult({"actor/entropy": 3.0, "actor/masked_seqs": 1.0}, {"actor/entropy": 1.0, "actor/masked_seqs": 1.0}, 1.5, None)]
    assert merge_micro_batches(results, [], 0.5) == {"actor/masked_seqs": 3.0, "actor/pg_loss": 1.0, "actor/entropy": 1.5}
    # a key without a declared kind is refused, not merged by a guess
    with pytest.raises(KeyError):
        merge_micro_batches([MicroResult({"actor/new": 1.0}, {"actor/new": 1.0}, 0.0, None)], [], 1.0)
