"""The "arena" entry of verl's policy-loss registry equals arena's own PG term, and verl's KL /
entropy aggregation (agg_loss with the mapped loss_agg_mode) equals arena's AGG."""
import itertools

import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, agg_loss, get_policy_loss_fn, kl_penalty  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402

from arena.backends.verl import policy_loss as vpl  # noqa: E402
from arena.backends.verl.agg_modes import VERL_AGG_MODE  # noqa: E402
from arena.po.aggregation import AGG, AggNorm  # noqa: E402
from arena.po.compose import ResolvedPO, policy_loss, resolve  # noqa: E402
from arena.po.kl import kl_k3  # noqa: E402


def _inputs(seed=0, b=4, t=5):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 2  # [B, T]
    logp = (old + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)).requires_grad_(True)  # [B, T]
    adv = torch.tensor([1.0, -0.5, -2.0, 0.7], dtype=torch.float64)[:, None].expand(b, t).clone()  # [B, T]
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)  # [B, T]
    return old, logp, adv, mask


def _actor(settings, mode, info):
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=2, policy_loss=settings,
                      loss_agg_mode=mode)
    cfg.global_batch_info.update(info)
    return cfg


def test_registry_resolves_after_import():
    assert get_policy_loss_fn("arena") is vpl.arena_policy_loss
    vpl.register()  # idempotent for the same function
    assert POLICY_LOSS_REGISTRY["arena"] is vpl.arena_policy_loss


def test_name_collision_raises(monkeypatch):
    monkeypatch.setitem(POLICY_LOSS_REGISTRY, "arena", POLICY_LOSS_REGISTRY["vanilla"])
    with pytest.raises(ValueError, match="already registered.*'vanilla'"):
        vpl.register()


def test_global_batch_info_mapping_by_hand():
    # verl: token-mean = S / batch_num_tokens * dp = S / 8 * 2 = S / 4 -> AggNorm.num_tokens = 8 / 2 = 4
    # seq modes: / global_batch_size * dp = / 6 * 2 -> num_seqs = 3; horizon = loss_scale_factor = 7
    mask = torch.ones(2, 3)
    norm = vpl.norm_from_global_batch_info({"dp_size": 2, "batch_num_tokens": 8, "global_batch_size": 6,
                                            "loss_scale_factor": 7}, mask)
    assert norm == AggNorm(num_tokens=4.0, num_seqs=3.0, horizon=7.0)
    # no global counts (dp 1): the micro-batch's own counts, 6 tokens in 2 rows
    assert vpl.norm_from_global_batch_info({}, mask) == AggNorm(num_tokens=6.0, num_seqs=2.0, horizon=None)
    with pytest.raises(ValueError, match="required when dp_size > 1"):
        vpl.norm_from_global_batch_info({"dp_size": 2}, mask)


CASES = list(itertools.product(
    [("ppo", {"eps_low": 0.2, "eps_high": 0.28, "clip_c": 3.0}), ("gspo", {"eps_low": 3e-4, "eps_high": 4e-4}),
     ("cispo", {"eps_low": 1.0, "eps_high": 0.2}), ("sapo", {"tau_pos": 2.0, "tau_neg": 2.1})],
    list(AGG), [None, 3e-3],
))


@pytest.mark.parametrize("clip,agg,delta", CASES, ids=[f"{c[0]}-{a}-{d}" for c, a, d in CASES])
def test_verl_call_equals_arena_value_and_grad(clip, agg, delta):
    name, hp = clip
    old, logp, adv, mask = _inputs()
    # dp=2 global counts (this rank holds half): 2*8 tokens, 2*3 seqs, horizon 6
    info = {"dp_size": 2, "batch_num_tokens": 16, "global_batch_size": 6, "loss_scale_factor": 6}
    # delta None = mask off; else the neg_adv_kl member with its own hyperparameter
    mask_member, mask_hp = ("none", {}) if delta is None else ("neg_adv_kl", {"seq_mask_delta": delta})
    po = ResolvedPO(None, None, agg, name, mask_member, "none", "grpo", "global", {**hp, **mask_hp})
    settings = vpl.ArenaPolicyLossConfig.of(po)
    fn = get_policy_loss_fn("arena")
    pg_verl, metrics = fn(old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask,
                          loss_agg_mode=VERL_AGG_MODE[agg], config=_actor(settings, VERL_AGG_MODE[agg], info),
                          rollout_is_weights=None)
    (grad_verl,) = torch.autograd.grad(pg_verl, logp)
    pg_arena, arena_metrics = policy_loss(po, logp, old, adv, mask.double(), norm=AggNorm(8.0, 3.0, 6.0))
    (grad_arena,) = torch.autograd.grad(pg_arena, logp)
    # float64; only the order of x/(n/d) vs x/n*d differs: a few ulp
    torch.testing.assert_close(pg_verl, pg_arena, rtol=1e-13, atol=0)
    torch.testing.assert_close(grad_verl, grad_arena, rtol=1e-13, atol=1e-15)
    assert metrics["actor/clipfrac_high"] == arena_metrics["actor/clipfrac_high"]
    assert metrics["actor/ppo_kl"] == arena_metrics["actor/off_policy_kl"]
    assert pg_verl.abs() > 0  # the case exercises something
    # and verl's own aggregation of arena's per-token loss gives the same scalar
    from arena.po.clipping import CLIP, seq_mask

    mask_pg = seq_mask(logp, old, adv, mask.double(), delta)
    loss_tok, _ = CLIP[name](logp, old, adv, mask_pg, **hp)  # [B, T]
    ref = agg_loss(loss_tok, mask_pg, VERL_AGG_MODE[agg], **info)
    rtol = 1e-13 if agg != "seq_mean_token_mean" else 1e-8  # verl divides rows by n_j + 1e-8, arena by n_j
    torch.testing.assert_close(pg_verl, ref, rtol=rtol, atol=0)


def test_sequence_mask_rejects_a_row():
    # row 1 (A=-0.5) with logp = old - 0.01 on all 5 tokens: D = 0.01 > delta 3e-3 -> masked
    old, logp, adv, mask = _inputs()
    logp = logp.detach().clone()
    logp[1] = old[1] - 0.01
    settings = vpl.ArenaPolicyLossConfig.of(resolve({"clipping": "cispo", "seq_mask": "neg_adv_kl",
                                                     "hp": {"seq_mask_delta": 3e-3}}))
    _, metrics = vpl.arena_policy_loss(old, logp, adv, mask, "token-mean", _actor(settings, "token-mean", {}))
    assert metrics["actor/masked_seqs"] >= 1.0


@pytest.mark.parametrize("agg", list(AGG))
def test_verl_kl_and_entropy_aggregation_equal_arena(agg):
    old, logp, _, mask = _inputs(seed=1)
    ref = old + 0.1  # [B, T]
    ent = torch.rand(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))  # [B, T]
    info = {"dp_size": 2, "batch_num_tokens": 16, "global_batch_size": 6, "loss_scale_factor": 6}
    norm = vpl.norm_from_global_batch_info(info, mask.double())
    mode = VERL_AGG_MODE[agg]
    rtol = 1e-13 if agg != "seq_mean_token_mean" else 1e-8  # verl's n_j + 1e-8
    kl_verl = agg_loss(kl_penalty(logp, ref, "low_var_kl"), mask, mode, **info)
    kl_arena = AGG[agg](kl_k3(logp, ref), mask.double(), norm=norm)
    torch.testing.assert_close(kl_verl, kl_arena, rtol=rtol, atol=0)
    torch.testing.assert_close(agg_loss(ent, mask, mode, **info), AGG[agg](ent, mask.double(), norm=norm),
                               rtol=rtol, atol=0)


def test_kl_by_hand():
    # one token, ref - logp = 0.5: k3 = e^0.5 - 0.5 - 1 = 0.1487212707; token-mean over dp=2 ranks
    # of 1 token each: verl (0.14872 / 2 * 2) = arena (0.14872 / 1)
    logp, ref = torch.zeros(1, 1, dtype=torch.float64), torch.full((1, 1), 0.5, dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.bool)
    info = {"dp_size": 2, "batch_num_tokens": 2, "global_batch_size": 2, "loss_scale_factor": None}
    value = agg_loss(kl_penalty(logp, ref, "low_var_kl"), mask, "token-mean", **info)
    assert abs(float(value) - 0.1487212707001282) < 1e-12


def test_bad_settings_list_valid_names():
    good = resolve({"method": "grpo"}).to_dict()
    with pytest.raises(ValueError, match="valid: cispo, gspo, ppo, sapo"):
        vpl.ArenaPolicyLossConfig(po={**good, "clipping": "nope"})
    with pytest.raises(ValueError, match="valid: global"):
        vpl.ArenaPolicyLossConfig(po={**good, "agg_norm": "per_microbatch"})
    with pytest.raises(ValueError, match="unknown seq_mask 'kl'; valid: neg_adv_kl, none"):
        vpl.ArenaPolicyLossConfig(po={**good, "seq_mask": "kl"})
    # a hyperparameter no member takes raises (it would otherwise be ignored)
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['tau_pos'\] for aggregation=token_mean, clipping=ppo"):
        vpl.ArenaPolicyLossConfig(po={**good, "hp": {"tau_pos": 1.0}})
    # no PO, or one missing a member: an error naming the keys, never a made-up member
    with pytest.raises(ValueError, match=r"missing \['advantage', 'agg_norm'.*'seq_mask'\]"):
        vpl.ArenaPolicyLossConfig()
    with pytest.raises(ValueError, match=r"missing \['filtering'\], unknown \['filter'\]"):
        vpl.ArenaPolicyLossConfig(po={**{k: v for k, v in good.items() if k != "filtering"}, "filter": "none"})
    old, logp, adv, mask = _inputs()
    cfg = _actor(vpl.ArenaPolicyLossConfig.of(resolve({"aggregation": "seq_mean_token_mean"})), "token-mean", {})
    with pytest.raises(ValueError, match="'seq-mean-token-mean'"):
        vpl.arena_policy_loss(old, logp, adv, mask, "token-mean", cfg)
