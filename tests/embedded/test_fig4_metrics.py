"""`actor/low_ratio_neg_seqs` (docs/testbed.md, the collapse regime): the negative-advantage rows
whose mean log-ratio fell below -3e-3, counted by ppo_update whether or not the mask is on."""
import math

import torch

from arena.backends.embedded.update import LOW_RATIO_DELTA, ppo_update
from arena.po.compose import resolve
from arena.po.types import make_batch


class _Table(torch.nn.Module):
    """logp(token) = log_softmax(w)[token], the same for every position and prompt."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))


def _logprobs(model, prompt_ids, prompt_mask, response_ids, response_mask):
    logp = torch.log_softmax(model.w, -1)[response_ids] * response_mask  # [n, T]
    return logp, torch.zeros_like(logp)  # [n, T] x2


def test_low_ratio_negative_rows_are_counted_with_the_mask_off():
    # Current policy: w = 0, so logp = ln 0.5 for every token. Old log-probs per row (1 token):
    #   row 0: ln 0.5 + 0.01 -> D = old - new = +0.01 > 3e-3, A < 0  -> counted
    #   row 1: ln 0.5 + 0.01 -> D = +0.01,                    A > 0  -> not counted (positive A)
    #   row 2: ln 0.5 - 0.01 -> D = -0.01,                    A < 0  -> not counted (ratio > 1)
    #   row 3: ln 0.5 + 0.001 -> D = 0.001 < 3e-3,            A < 0  -> not counted (below delta)
    # One mini-batch, two epochs (so old is not stopgrad(logp)); lr 0 keeps w = 0, so both
    # optimizer steps count row 0 only, and the logged mean over the 2 steps is 1.
    n = 4
    base = math.log(0.5)
    b = make_batch(group_id=[0] * n, traj_id=list(range(n)), turn_idx=[0] * n, turn_reward=[0.0] * n,
                   episode_return=[0.0] * n, score=[0.0] * n, format_valid=[True] * n, action_valid=[True] * n,
                   won=[False] * n)
    b.prompt_ids = torch.zeros(n, 1, dtype=torch.long)
    b.prompt_mask = torch.ones(n, 1, dtype=torch.long)
    b.response_ids = torch.zeros(n, 1, dtype=torch.long)  # [n, 1]
    b.response_mask = torch.ones(n, 1, dtype=torch.float64)  # [n, 1]
    b.old_logp = torch.tensor([[base + 0.01], [base + 0.01], [base - 0.01], [base + 0.001]], dtype=torch.float64)  # [n, 1]
    b.ref_logp = None
    adv = torch.tensor([-1.0, 1.0, -1.0, -1.0], dtype=torch.float64)  # [n]
    assert LOW_RATIO_DELTA == 3e-3
    model = _Table()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: the policy stays at w = 0
    po = resolve({"method": "grpo"})
    metrics = ppo_update(model, opt, po, b, adv, _logprobs, num_mini_batches=1, mini_batch_size=None,
                         ppo_epochs=2, micro_batch_size=2)
    assert metrics["actor/low_ratio_neg_seqs"] == 1.0  # row 0 only, in each of the 2 optimizer steps
    assert metrics["actor/masked_seqs"] == 0.0  # GRPO has no sequence mask: nothing removed
