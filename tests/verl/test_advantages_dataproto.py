"""verl's registry resolves arena_grpo / arena_gigpo / arena_empg; called with the per-turn
fields they equal arena's ADV; a TurnBatch survives TurnBatch -> DataProto -> TurnBatch."""
import dataclasses

import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, get_adv_estimator_fn  # noqa: E402

from arena.backends.verl import advantages as vadv  # noqa: E402
from arena.backends.verl.dataproto import from_dataproto, to_dataproto  # noqa: E402
from arena.po.advantages import ADV, broadcast  # noqa: E402
from arena.po.types import TurnBatch, make_batch  # noqa: E402


def _batch():
    # group 0: traj 0 (2 turns, won), traj 1 (2 turns, lost); group 1: traj 2 (1 turn), traj 3 (1 turn)
    g = torch.Generator().manual_seed(0)
    b = make_batch(
        group_id=[0, 0, 0, 0, 1, 1], traj_id=[0, 0, 1, 1, 2, 3], turn_idx=[0, 1, 0, 1, 0, 0],
        turn_reward=[0.0, 1.0, 0.0, 0.0, 0.5, 0.0], episode_return=[1.0, 1.0, 0.0, 0.0, 0.5, 0.0],
        score=[1.0, 0.9, 0.0, -0.1, 0.5, 0.0], format_valid=[1, 1, 1, 0, 1, 1],
        action_valid=[1, 0, 1, 0, 1, 1], won=[1, 1, 0, 0, 1, 0],
        anchor_obs=["s0", "s1", "s0", "s2", "t0", "t0"],
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.float32)
    return dataclasses.replace(
        b, prompt_ids=torch.randint(1, 50, (6, 4), generator=g), prompt_mask=torch.tensor([[0, 1, 1, 1]] * 6),
        response_ids=torch.randint(1, 50, (6, 3), generator=g) * mask.long(), response_mask=mask,
        sampler_logp=-torch.rand(6, 3, generator=g), old_logp=-torch.rand(6, 3, generator=g),
        ref_logp=-torch.rand(6, 3, generator=g), entropy=torch.rand(6, 3, generator=g),
        response_text=[f"r{i}" for i in range(6)],
    )


def test_round_trip_is_lossless():
    b = _batch()
    back = from_dataproto(to_dataproto(b))
    for f in dataclasses.fields(TurnBatch):
        x, y = getattr(b, f.name), getattr(back, f.name)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name


def test_round_trip_without_backend_tensors():
    b = make_batch(group_id=[3], traj_id=[7], turn_idx=[2], turn_reward=[0.25], episode_return=[1.0], score=[0.9],
                   format_valid=[1], action_valid=[0], won=[1], anchor_obs=["x"])
    back = from_dataproto(to_dataproto(b))
    assert back.traj_id.tolist() == [7] and back.score.tolist() == [pytest.approx(0.9)] and back.prompt_ids is None
    assert back.anchor_obs == ["x"] and back.response_text == []


def test_derived_verl_fields():
    data = to_dataproto(_batch())
    # row 1 has 3 valid tokens -> score 0.9 at t=2; row 0 has 2 -> score 1.0 at t=1
    assert data.batch["token_level_scores"][1].tolist() == pytest.approx([0.0, 0.0, 0.9])
    assert data.batch["token_level_scores"][0].tolist() == pytest.approx([0.0, 1.0, 0.0])
    # attention = [0,1,1,1 | 1,1,0] -> positions [0,0,1,2,3,4,4]
    assert data.batch["position_ids"][0].tolist() == [0, 0, 1, 2, 3, 4, 4]
    assert list(data.non_tensor_batch["uid"]) == ["0", "0", "0", "0", "1", "1"]


def test_registry_resolves_our_estimators():
    for name in ("arena_grpo", "arena_gigpo", "arena_empg"):
        assert get_adv_estimator_fn(name) is vadv.ESTIMATORS[name]
        assert ADV_ESTIMATOR_REGISTRY[name] is vadv.ESTIMATORS[name]
    vadv.register()  # idempotent


@pytest.mark.parametrize("name,hp", [("grpo", {}), ("grpo", {"group_stats": "per_trajectory"}),
                                     ("gigpo", {"gamma": 0.9, "mode": "mean_norm"}), ("gigpo", {}),
                                     ("empg", {"zeta": 0.1})])
def test_estimators_equal_arena(name, hp):
    b = _batch()
    data = vadv.compute_arena_advantage(to_dataproto(b), f"arena_{name}", **hp)
    expected = broadcast(ADV[name](b, **hp), b.response_mask)  # [N, T]
    assert torch.equal(data.batch["advantages"], expected)
    assert torch.equal(data.batch["returns"], expected)
    assert expected.abs().sum() > 0


def test_grpo_by_hand():
    # group 1 = rows 4, 5 with scores 0.5, 0.0: mean 0.25, unbiased std = 0.353553...;
    # A = +-0.25 / (0.353553 + 1e-6) = +-0.707105 on every valid token
    data = vadv.compute_arena_advantage(to_dataproto(_batch()), "arena_grpo")
    assert data.batch["advantages"][4].tolist() == pytest.approx([0.7071048] * 3, abs=1e-6)
    assert data.batch["advantages"][5].tolist() == pytest.approx([-0.7071048, 0.0, 0.0], abs=1e-6)


def test_missing_fields_are_named():
    data = to_dataproto(_batch())
    fn = get_adv_estimator_fn("arena_gigpo")
    # the plain verl call (no non_tensor_batch) says what it needs
    with pytest.raises(ValueError, match=r"anchor_obs.*compute_arena_advantage"):
        fn(token_level_rewards=data.batch["token_level_rewards"], response_mask=data.batch["response_mask"],
           index=data.non_tensor_batch["uid"])
    data.non_tensor_batch.pop("anchor_obs")
    with pytest.raises(ValueError, match=r"missing field\(s\) \['anchor_obs'\]"):
        vadv.compute_arena_advantage(data, "arena_gigpo")
    data.batch.pop("entropys")
    with pytest.raises(ValueError, match=r"missing field\(s\) \['entropy'\]"):
        vadv.compute_arena_advantage(data, "arena_empg")
    with pytest.raises(ValueError, match="valid: arena_grpo, arena_gigpo, arena_empg"):
        vadv.compute_arena_advantage(data, "grpo")
