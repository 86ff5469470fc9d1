"""verl's `workers/utils/losses.py::ppo_loss` (the engine's loss) with loss_mode "arena", called
directly on a hand-built TensorDict, so value and gradient can be compared exactly: total =
PG + kl_coef*KL - entropy_coeff*H equals arena's `objective`. The same loss run through the FSDP
engine's `train_batch` on CPU (one-process gloo group) is tests/verl/test_engine_train_batch.py."""
import pytest
import torch

pytest.importorskip("verl")

from tensordict import TensorDict  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

from arena.backends.verl.policy_loss import ArenaPolicyLossConfig  # noqa: E402
from arena.backends.verl.agg_modes import VERL_AGG_MODE  # noqa: E402
from arena.po.aggregation import AggNorm  # noqa: E402
from arena.po.compose import ResolvedPO, objective  # noqa: E402


def _flatten(resp, prompt_len, lens):
    """Response values [B, T] -> verl's no-padding layout: row j holds P + r_j slots and the
    response value of token t sits at slot P - 1 + t (the model output is left-shifted by one)."""
    rows = []
    for j, r in enumerate(lens):
        row = torch.zeros(prompt_len + r, dtype=resp.dtype)  # [P + r_j]
        row = torch.cat([row[: prompt_len - 1], resp[j, :r], row[prompt_len - 1 + r:]])
        rows.append(row)
    return torch.cat(rows)  # [sum_j (P + r_j)]


@pytest.mark.parametrize("agg,clip", [("token_mean", "ppo"), ("seq_mean_token_sum", "gspo"),
                                      ("seq_mean_token_sum_norm", "sapo")])
def test_ppo_loss_with_arena_equals_objective(agg, clip):
    g = torch.Generator().manual_seed(3)
    b, p, t = 3, 2, 4
    lens = [4, 2, 3]
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.float64)  # [B, T]
    old = -torch.rand(b, t, generator=g, dtype=torch.float64)  # [B, T]
    logp_resp = old + 0.05 * torch.randn(b, t, generator=g, dtype=torch.float64)  # [B, T]
    ref = old - 0.1  # [B, T]
    ent = torch.rand(b, t, generator=g, dtype=torch.float64)  # [B, T]
    adv = torch.tensor([[1.0], [-1.0], [0.5]], dtype=torch.float64).expand(b, t) * mask  # [B, T]
    flat = _flatten(logp_resp, p, lens).requires_grad_(True)  # [nnz]
    flat_ent = _flatten(ent, p, lens)  # [nnz]

    data = TensorDict({
        "prompts": torch.ones(b, p, dtype=torch.long), "responses": torch.ones(b, t, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(b, p), mask.float()], dim=1).long(),  # [B, P+T]
        "response_mask": mask.long(), "old_log_probs": old, "advantages": adv, "ref_log_prob": ref,
    }, batch_size=[b])
    # this rank's micro-batch is half of a dp=2 mini-batch: 2*9 tokens, 2*3 sequences
    tu.assign_non_tensor(data, dp_size=2, batch_num_tokens=18, global_batch_size=6)
    actor = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=3,
                        policy_loss=ArenaPolicyLossConfig.of(ResolvedPO(None, None, agg, clip, "none", "none", "grpo",
                                                                        "global", {})),
                        loss_agg_mode=VERL_AGG_MODE[agg], use_kl_loss=True, kl_loss_coef=0.01,
                        kl_loss_type="low_var_kl", entropy_coeff=0.02, loss_scale_factor=4)
    total, metrics = ppo_loss(actor, {"log_probs": flat, "entropy": flat_ent}, data)
    (grad_verl,) = torch.autograd.grad(total, flat)

    logp = logp_resp.clone().requires_grad_(True)  # [B, T]
    po = ResolvedPO(None, None, agg, clip, "none", "none", "grpo", "global", {})
    ours = objective(po, logp, old, adv, mask, ref_logp=ref, entropy=ent, kl_coef=0.01, entropy_coef=0.02,
                     norm=AggNorm(num_tokens=9.0, num_seqs=3.0, horizon=4.0))
    (grad_arena,) = torch.autograd.grad(ours.total, logp)
    torch.testing.assert_close(total, ours.total, rtol=1e-12, atol=0)
    # gradient slots of the flat layout are the response tokens
    torch.testing.assert_close(_flatten(grad_arena * mask, p, lens), grad_verl, rtol=1e-12, atol=1e-15)
    assert torch.isfinite(total) and grad_verl.abs().sum() > 0
    assert "actor/pg_loss" in metrics and "actor/clipfrac_high" in metrics and "kl_loss" in metrics
