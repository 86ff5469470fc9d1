"""The verl trainer cuts the per-turn rows into the embedded backend's mini-batches, each padded
to whole micro-batches (mini_batches.mini_batch_layout, fan_out.pad_rows), and the agent-loop
registry keeps the config entry's constructor keywords (agent_loop.register_agent_loop).
What verl's update then computes on those mini-batches: tests/verl/test_update_mini_batches.py."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl")

from arena.po.batching import mini_batch_slices  # noqa: E402
from arena.backends.verl.fan_out import pad_rows  # noqa: E402
from arena.backends.verl.mini_batches import MiniBatch, mini_batch_layout  # noqa: E402
from arena.po.types import make_batch  # noqa: E402


@pytest.mark.parametrize("n_rows,k,turns,unit,want", [
    # N=114, k=2: embedded bounds round(0), round(57), 114 -> 57 + 57 rows; unit 8 -> 64 rows each (7 pads)
    (114, 2, None, 8, [(0, 57, 64), (57, 114, 64)]),
    # N=115, k=2: round(57.5) = 58 (half to even) -> 58 + 57 rows; unit 4 -> 60 + 60 (2 and 3 pads)
    (115, 2, None, 4, [(0, 58, 60), (58, 115, 60)]),
    # N=13, k=3: round(4.33) = 4, round(8.67) = 9 -> 4, 5, 4 rows; unit 4 -> 4, 8, 4
    (13, 3, None, 4, [(0, 4, 4), (4, 9, 8), (9, 13, 4)]),
    # N=5, k=4: k = min(4, 5) = 4, bounds round(1.25)=1, round(2.5)=2, round(3.75)=4 -> 1,1,2,1 rows; unit 4
    (5, 4, None, 4, [(0, 1, 4), (1, 2, 4), (2, 4, 4), (4, 5, 4)]),
    # s = 10 turn-samples: slices of 10 -> 3 mini-batches; unit 4 -> 12 rows each
    (30, 2, 10, 4, [(0, 10, 12), (10, 20, 12), (20, 30, 12)]),
    # s = 3, N = 7: 3, 3, 1 rows; unit 2 -> 4, 4, 2
    (7, 1, 3, 2, [(0, 3, 4), (3, 6, 4), (6, 7, 2)]),
])
def test_layout_is_the_embedded_split_padded_to_whole_micro_batches(n_rows, k, turns, unit, want):
    layout = mini_batch_layout(n_rows, num_mini_batches=k, mini_batch_turns=turns, unit=unit)
    assert [tuple(mb) for mb in layout] == want
    # the same rows as the embedded backend's mini-batches, in the same order
    embedded = mini_batch_slices(n_rows, num_mini_batches=k, mini_batch_size=turns)
    assert [(mb.start, mb.stop) for mb in layout] == [(s.start, s.stop) for s in embedded]
    assert all(mb.rows % unit == 0 and mb.rows >= mb.stop - mb.start for mb in layout)


def _turns(n: int):
    """n turn rows of one trajectory, row j with j + 1 response tokens (T = n)."""
    mask = torch.tensor([[1.0] * (j + 1) + [0.0] * (n - j - 1) for j in range(n)])  # [n, n]
    return make_batch(group_id=[0] * n, traj_id=[0] * n, turn_idx=list(range(n)), turn_reward=[1.0] * n,
                      episode_return=[2.0] * n, score=[3.0] * n, format_valid=[True] * n, action_valid=[True] * n,
                      won=[True] * n, response_mask=mask)


def test_pad_rows_follow_their_mini_batch():
    # 5 turns in slices [0, 2) and [2, 5), padded to 2 and 4 rows: one pad row, after row 4,
    # copying row 2 (its mini-batch's first row: index start + 0 % 3)
    turns = _turns(5)
    padded, is_pad, mini = pad_rows(turns, [MiniBatch(0, 2, 2), MiniBatch(2, 5, 4)])
    assert is_pad.tolist() == [False] * 5 + [True] and mini.tolist() == [0, 0, 1, 1, 1, 1]
    assert torch.equal(padded.response_mask[5], turns.response_mask[2])  # the copy; actor_rows zeroes its mask
    # the pad is a trajectory and a group of its own, with no reward
    assert (int(padded.group_id[5]), int(padded.traj_id[5]), int(padded.turn_idx[5])) == (1, 1, 0)
    assert (float(padded.score[5]), float(padded.turn_reward[5]), bool(padded.won[5])) == (0.0, 0.0, False)
    assert padded.score[:5].tolist() == [3.0] * 5 and turns.group_id.tolist() == [0] * 5  # the source is untouched
    with pytest.raises(ValueError, match="does not cover"):
        pad_rows(turns, [MiniBatch(0, 2, 2), MiniBatch(3, 5, 2)])


def test_agent_loop_registry_keeps_the_config_entry_when_the_module_loads_again():
    # verl's worker loads the yaml entry (with keywords) first and imports the module only when
    # instantiating the first episode; the import must not replace the entry by a bare _target_
    import importlib

    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from arena.backends.verl import agent_loop
    from arena.backends.verl.verl_config import AGENT_LOOP_NAME

    before = _agent_loop_registry.get(AGENT_LOOP_NAME)
    entry = OmegaConf.create({"name": AGENT_LOOP_NAME, "_target_": "arena.backends.verl.agent_loop.ArenaAgentLoop",
                              "env_name": "sokoban", "template": "minimal"})
    try:
        _agent_loop_registry[AGENT_LOOP_NAME] = entry
        importlib.reload(agent_loop)
        assert _agent_loop_registry[AGENT_LOOP_NAME] is entry and agent_loop.is_registered()
        del _agent_loop_registry[AGENT_LOOP_NAME]
        agent_loop.register_agent_loop()  # nothing there: the bare entry
        assert dict(_agent_loop_registry[AGENT_LOOP_NAME]) == {"_target_": entry["_target_"]}
    finally:
        _agent_loop_registry[AGENT_LOOP_NAME] = before
