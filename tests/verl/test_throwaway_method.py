"""A new method is one function per new member plus one preset line, on both backends.

A throwaway module (written to a temp dir, imported like a user's plugin) defines a clip loss
with a hyperparameter no other member has (`beta`) and an advantage with its own (`shift`);
the test registers them and one preset line, then runs the preset through the embedded
config path (load_config -> resolve -> objective / compute_advantages) and the verl config
path (build_verl_config -> verl's dataclasses -> verl's registries). Nothing in arena's verl
adapter names the new member or its hyperparameters: the adapter derives them, so a forgotten
hyperparameter cannot be dropped on the way to verl.
"""
import dataclasses
import importlib
import sys
import textwrap

import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo import core_algos  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402

from arena.backends.verl import advantages as vadv  # noqa: E402
from arena.backends.verl.dataproto import to_dataproto  # noqa: E402
from arena.backends.verl.policy_loss import ArenaPolicyLossConfig, arena_policy_loss  # noqa: E402
from arena.backends.verl.verl_config import build_verl_config, validate  # noqa: E402
from arena.config import load_config, resolve_po  # noqa: E402
from arena.po import ADV, CLIP, methods  # noqa: E402
from arena.po.aggregation import AggNorm  # noqa: E402
from arena.po.compose import compute_advantages, objective  # noqa: E402
from arena.po.types import make_batch  # noqa: E402

PLUGIN = textwrap.dedent('''
    import torch
    from arena.po.members import reads

    def scaled_pg(logp, old_logp, adv, mask, *, beta: float = 1.0):
        """L = -beta * A * r, r = exp(logp - old_logp): a plain PG loss scaled by beta."""
        ratio = (logp - old_logp).exp()  # [B, T]
        zero = torch.zeros((), dtype=logp.dtype)
        return -beta * adv * ratio, {"clipfrac_high": zero, "clipfrac_low": zero,
                                     "clipfrac_pos_adv": zero, "clipfrac_neg_adv": zero}

    @reads("group_id", "traj_id", "score")
    def shifted(batch, *, shift: float = 0.0):
        """A_j = score_j - mean(score) + shift."""
        return batch.score - batch.score.mean() + shift
''')


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    (tmp_path / "throwaway_members.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("throwaway_members")
    monkeypatch.setitem(CLIP, "scaled_pg", mod.scaled_pg)
    monkeypatch.setitem(ADV, "shifted", mod.shifted)
    # the one preset line
    monkeypatch.setitem(methods.PRESET_TABLE, "throwaway", methods.Preset(
        "clipping", "test only", clipping="scaled_pg", advantage="shifted", hp=dict(beta=0.5, shift=0.25)))
    # verl's registry is process-global: give this test its own copies
    monkeypatch.setattr(core_algos, "ADV_ESTIMATOR_REGISTRY", dict(core_algos.ADV_ESTIMATOR_REGISTRY))
    monkeypatch.setattr(vadv, "ESTIMATORS", dict(vadv.ESTIMATORS))
    yield mod
    sys.modules.pop("throwaway_members", None)


def _batch():
    # one group of 3 one-turn trajectories; scores 1, 0, 0.5 (mean 0.5)
    return make_batch(group_id=[0, 0, 0], traj_id=[0, 1, 2], turn_idx=[0, 0, 0], turn_reward=[1.0, 0.0, 0.5],
                      episode_return=[1.0, 0.0, 0.5], score=[1.0, 0.0, 0.5], format_valid=[1, 1, 1],
                      action_valid=[1, 1, 1], won=[1, 0, 0], anchor_obs=["a", "b", "c"])


def _loss_inputs():
    # logp = old everywhere, so r = 1 and L = -beta * A on every valid token
    old = torch.zeros(2, 3, dtype=torch.float64)  # [B, T]
    logp = old.clone().requires_grad_(True)  # [B, T]
    adv = torch.tensor([[1.0] * 3, [-2.0] * 3], dtype=torch.float64)  # [B, T]
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.float64)  # [B, T] 5 valid tokens
    return old, logp, adv, mask


def test_embedded_config_path(throwaway):
    po = resolve_po(load_config(["po.method=throwaway"]))
    assert (po.clipping, po.advantage, po.member_hp("clipping"), po.member_hp("advantage")) == (
        "scaled_pg", "shifted", {"beta": 0.5}, {"shift": 0.25})
    # A = score - 0.5 + 0.25 = [0.75, -0.25, 0.25]
    assert compute_advantages(po, _batch()).tolist() == pytest.approx([0.75, -0.25, 0.25])
    # token_mean of -beta*A over 5 tokens: -0.5 * (1 + 1 - 2 - 2 - 2) / 5 = -0.5 * -4 / 5 = 0.4
    old, logp, adv, mask = _loss_inputs()
    assert objective(po, logp, old, adv, mask).total.item() == pytest.approx(0.4)
    # an override of the new hyperparameter reaches the function: beta 1 -> 0.8
    po1 = resolve_po(load_config(["po.method=throwaway", "po.hp.beta=1.0"]))
    assert objective(po1, logp, old, adv, mask).total.item() == pytest.approx(0.8)


def test_verl_config_path(throwaway):
    cfg = load_config(["po.method=throwaway", "model.path=/models/any"])
    verl_cfg = build_verl_config(cfg)
    actor = validate(verl_cfg)["actor"]
    loss_cfg = actor.policy_loss
    # the new members and hyperparameters reached verl's config without any edit of the adapter
    assert isinstance(loss_cfg, ArenaPolicyLossConfig) and loss_cfg.resolved() == resolve_po(cfg)
    assert (loss_cfg.po["clipping"], loss_cfg.po["advantage"]) == ("scaled_pg", "shifted")
    assert loss_cfg.po["hp"] == {"beta": 0.5, "shift": 0.25}
    assert verl_cfg.algorithm.adv_estimator == "arena_shifted"

    # verl's policy-loss call gives the same 0.4 as the embedded objective (one rank, local counts)
    old, logp, adv, mask = _loss_inputs()
    actor_cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=2, policy_loss=loss_cfg,
                            loss_agg_mode="token-mean")
    pg, _ = core_algos.get_policy_loss_fn("arena")(old, logp, adv, mask.bool(), "token-mean", actor_cfg, None)
    assert pg is not None and pg.item() == pytest.approx(0.4)
    assert arena_policy_loss is core_algos.get_policy_loss_fn("arena")

    # verl's advantage registry has the new estimator, with the fields its @reads declares
    data = to_dataproto(dataclasses.replace(_batch(), response_mask=torch.ones(3, 2)))  # [N, T]
    po = resolve_po(cfg)
    vadv.compute_arena_advantage(data, verl_cfg.algorithm.adv_estimator, **po.member_hp("advantage"))
    assert data.batch["advantages"][:, 0].tolist() == pytest.approx([0.75, -0.25, 0.25])
    assert vadv.required_fields("shifted") == ("group_id", "traj_id", "score")


def test_a_hyperparameter_cannot_be_dropped_on_the_way_to_verl(throwaway):
    # every explicit hp of the run is in the section; a key no member of the run takes raises
    po = resolve_po(load_config(["po.method=throwaway", "po.hp.beta=0.125"]))
    assert ArenaPolicyLossConfig.section(po)["po"]["hp"] == {"beta": 0.125, "shift": 0.25}
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['gamma'\] for aggregation=token_mean, "
                                         r"clipping=scaled_pg, seq_mask=none, filtering=none, advantage=shifted; "
                                         r"valid: beta, shift"):
        ArenaPolicyLossConfig(po={**po.to_dict(), "hp": {"beta": 0.5, "gamma": 0.9}})
    # and the loss uses it: beta 0.125 gives 0.125 * 4 / 5 = 0.1
    old, logp, adv, mask = _loss_inputs()
    cfg = ArenaPolicyLossConfig(**{k: v for k, v in ArenaPolicyLossConfig.section(po).items() if k != "_target_"})
    assert cfg.resolved() == po
    actor_cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=2, policy_loss=cfg,
                            loss_agg_mode="token-mean")
    pg, _ = arena_policy_loss(old, logp, adv, mask.bool(), "token-mean", actor_cfg, None)
    assert pg.item() == pytest.approx(0.1)
