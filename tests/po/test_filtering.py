"""Trajectory filtering (docs/methods.md §7, docs/design.md §A): selection rule and the resampling loop."""
import inspect

import pytest

from arena.po.filtering import FILTER, collect_groups, dynamic, filter_hp_names, none
from arena.po.types import make_batch

# One entry per trajectory: groups 0..3 with two trajectories each.
#   g0 [0, 0] uniform, g1 [0, 10] mixed, g2 [10, 10] uniform, g3 [10, 0] mixed
GID = [0, 0, 1, 1, 2, 2, 3, 3]
KEY = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0]


def test_registry_and_signatures():
    assert set(FILTER) == {"none", "dynamic"}
    for fn in FILTER.values():
        params = inspect.signature(fn).parameters
        assert list(params)[:4] == ["group_id", "key", "needed_groups", "last_try"]
    assert filter_hp_names("none") == ()
    assert filter_hp_names("dynamic") == ("filter_key", "max_gen_batches", "cold_start_steps")
    with pytest.raises(ValueError, match="unknown filtering 'dapo'; valid: dynamic, none"):
        filter_hp_names("dapo")


def test_none_keeps_first_groups_in_order():
    assert none([5, 5, 3, 3, 7, 7], [0] * 6, needed_groups=2, last_try=False) == [5, 3]
    assert none(GID, KEY, needed_groups=10, last_try=True) == [0, 1, 2, 3]


def test_dynamic_keeps_non_uniform_groups():
    assert dynamic(GID, KEY, needed_groups=10, last_try=False) == [1, 3]
    assert dynamic(GID, KEY, needed_groups=1, last_try=False) == [1]  # truncated
    # exact equality: values differing by 1e-9 are not uniform
    assert dynamic([0, 0], [1.0, 1.0 + 1e-9], needed_groups=1, last_try=False) == [0]


def test_dynamic_last_try_fills_with_uniform_groups():
    # non-uniform first [1, 3], then the uniform ones in order [0, 2], truncated to needed_groups
    assert dynamic(GID, KEY, needed_groups=3, last_try=True) == [1, 3, 0]
    assert dynamic(GID, KEY, needed_groups=10, last_try=True) == [1, 3, 0, 2]
    assert dynamic(GID, KEY, needed_groups=0, last_try=True) == []


def test_filter_input_errors():
    with pytest.raises(ValueError, match="episode_return.*won"):
        dynamic(GID, KEY, needed_groups=1, last_try=False, filter_key="score")
    with pytest.raises(ValueError, match="one per trajectory"):
        dynamic(GID, KEY[:-1], needed_groups=1, last_try=False)
    with pytest.raises(ValueError, match="max_gen_batches"):
        dynamic(GID, KEY, needed_groups=1, last_try=False, max_gen_batches=0)


def _try_batch(try_idx, groups):
    """A scripted rollout try: `groups` is a list of groups, each a list of (return, won) per
    trajectory. Every trajectory has 2 turns (reward 0 then its return); group ids restart at 0
    and traj ids at 0 in every try, so the loop must renumber them. anchor_obs tags each row."""
    rows = {k: [] for k in ("group_id", "traj_id", "turn_idx", "turn_reward", "episode_return", "won", "anchor_obs")}
    traj = 0
    for g, trajs in enumerate(groups):
        for ret, won in trajs:
            for turn in (0, 1):
                rows["group_id"].append(g)
                rows["traj_id"].append(traj)
                rows["turn_idx"].append(turn)
                rows["turn_reward"].append(ret if turn == 1 else 0.0)
                rows["episode_return"].append(ret)
                rows["won"].append(won)
                rows["anchor_obs"].append(f"t{try_idx}g{g}x{traj}k{turn}")
            traj += 1
    n = len(rows["group_id"])
    return make_batch(score=list(rows["episode_return"]), format_valid=[True] * n, action_valid=[True] * n, **rows)


W, L = (10.0, True), (0.0, False)
TRIES = [
    [[W, W], [W, L], [L, L]],  # try 0: g1 mixed          (3 of 6 won)
    [[W, L], [L, L], [W, W]],  # try 1: g0 mixed          (3 of 6 won)
    [[L, L], [W, W], [L, W]],  # try 2: g2 mixed          (3 of 6 won)
]


class ScriptedRollout:
    def __init__(self, tries):
        self.tries, self.calls = tries, []

    def __call__(self, try_idx):
        self.calls.append(try_idx)
        return _try_batch(try_idx, self.tries[try_idx])


def _group_tags(batch):
    """(group_id, source tag of the group) per kept group, in row order."""
    seen = {}
    for g, obs in zip(batch.group_id.tolist(), batch.anchor_obs):
        seen.setdefault(g, obs.split("x")[0])
    return list(seen.items())


def test_collect_groups_three_tries():
    # needed 4: try 0 keeps g1 (1 kept), try 1 keeps g0 (2), try 2 is the last: mixed g2, then
    # uniform g0, g1 fill the remaining 2 -> [g2, g0]. 9 groups sampled, 4 kept -> 4/9.
    # Success over all 18 sampled trajectories = 9/18 = 0.5 (kept ones alone: 3/8).
    rollout = ScriptedRollout(TRIES)
    out, stats = collect_groups(rollout, "dynamic", needed_groups=4, step=1, max_gen_batches=3)
    assert rollout.calls == [0, 1, 2]
    assert _group_tags(out) == [(0, "t0g1"), (1, "t1g0"), (2, "t2g2"), (3, "t2g0")]
    assert stats["tries"] == 3 and stats["kept_groups"] == 4 and stats["sampled_groups"] == 9
    assert stats["kept_group_frac"] == pytest.approx(4 / 9, abs=1e-15)
    assert stats["all_success_rate"] == 0.5
    # whole trajectories are kept (2 rows each) with fresh, unique traj ids
    assert len(out) == 16
    assert out.traj_id.tolist() == [i // 2 for i in range(16)]
    assert out.turn_idx.tolist() == [0, 1] * 8


def test_collect_groups_stops_when_enough_and_two_batches():
    # needed 1: try 0 already keeps g1 -> one try, 1 of 3 groups kept.
    rollout = ScriptedRollout(TRIES)
    out, stats = collect_groups(rollout, "dynamic", needed_groups=1, step=1)
    assert rollout.calls == [0] and _group_tags(out) == [(0, "t0g1")]
    assert stats["kept_group_frac"] == pytest.approx(1 / 3, abs=1e-15)
    # max_gen_batches = 2: try 1 is the last -> mixed g0, then uniform g1, g2 fill up to 3 more.
    out, stats = collect_groups(ScriptedRollout(TRIES), "dynamic", needed_groups=4, step=1, max_gen_batches=2)
    assert [tag for _, tag in _group_tags(out)] == ["t0g1", "t1g0", "t1g1", "t1g2"]
    assert stats["tries"] == 2 and stats["kept_group_frac"] == pytest.approx(4 / 6, abs=1e-15)
    # needed 0: one try, nothing kept, an empty batch
    out, stats = collect_groups(ScriptedRollout(TRIES), "dynamic", needed_groups=0, step=1)
    assert len(out) == 0 and stats["tries"] == 1 and stats["kept_group_frac"] == 0.0


def test_collect_groups_cold_start_and_none():
    # step <= cold_start_steps: no filtering, one try, first needed groups (only 3 exist).
    for name, hp in (("dynamic", {"cold_start_steps": 5}), ("none", {})):
        rollout = ScriptedRollout(TRIES)
        out, stats = collect_groups(rollout, name, needed_groups=4, step=5, **hp)
        assert rollout.calls == [0]
        assert [tag for _, tag in _group_tags(out)] == ["t0g0", "t0g1", "t0g2"]
        assert stats["kept_group_frac"] == 1.0 and stats["all_success_rate"] == 0.5
    # step 6 > 5: filtering is on
    out, stats = collect_groups(ScriptedRollout(TRIES), "dynamic", needed_groups=1, step=6, cold_start_steps=5)
    assert [tag for _, tag in _group_tags(out)] == ["t0g1"]


def test_collect_groups_filter_key_won():
    # Shaped returns differ inside g0 but nobody won: uniform under `won`, mixed under returns.
    tries = [[[(3.5, False), (1.2, False)], [W, L]]]
    out, _ = collect_groups(ScriptedRollout(tries), "dynamic", needed_groups=2, step=1, max_gen_batches=1)
    assert [tag for _, tag in _group_tags(out)] == ["t0g0", "t0g1"]
    out, stats = collect_groups(
        ScriptedRollout(tries * 2), "dynamic", needed_groups=2, step=1, max_gen_batches=2, filter_key="won"
    )
    # try 0 keeps g1 only; try 1 (last) keeps g1, then fills nothing more (needed 1)
    assert [tag for _, tag in _group_tags(out)] == ["t0g1", "t1g1"]
    assert stats["all_success_rate"] == pytest.approx(2 / 8, abs=1e-15)


def test_collect_groups_bad_inputs():
    with pytest.raises(ValueError, match="episode_return.*won"):
        collect_groups(ScriptedRollout(TRIES), "dynamic", needed_groups=1, step=1, filter_key="score")
    with pytest.raises(ValueError, match="filter_key.*max_gen_batches.*cold_start_steps"):
        collect_groups(ScriptedRollout(TRIES), "dynamic", needed_groups=1, step=1, gamma=0.9)
    with pytest.raises(ValueError, match=r"for filtering=none; valid: \(none\)"):
        collect_groups(ScriptedRollout(TRIES), "none", needed_groups=1, step=1, filter_key="won")
    with pytest.raises(ValueError, match="unknown filtering 'dapo'; valid: dynamic, none"):
        collect_groups(ScriptedRollout(TRIES), "dapo", needed_groups=1, step=1)
