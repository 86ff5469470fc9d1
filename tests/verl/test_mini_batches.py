"""The verl trainer cuts the per-turn rows into as many mini-batches as the embedded backend
(trainer.arena_mini_batch_rows), and the agent-loop registry keeps the config entry's
constructor keywords (agent_loop.register_agent_loop)."""
from __future__ import annotations

import pytest

pytest.importorskip("verl")

from arena.backends.embedded.update import mini_batch_slices  # noqa: E402
from arena.backends.verl.trainer import arena_mini_batch_rows  # noqa: E402


@pytest.mark.parametrize("n_rows,k,unit,want", [
    # N=114 turns, k=1, unit 8: m = ceil(114 / 8) * 8 = 120, N' = 120 (one optimizer step, 6 pads)
    (114, 1, 8, (120, 120)),
    # k=2: m = ceil(114 / 16) * 8 = 64, N' = 128: two mini-batches of 64 rows (57 + 57 real on embedded)
    (114, 2, 8, (64, 128)),
    # N=13, k=3, unit 4: k' = min(3, ceil(13/4) = 4) = 3, m = ceil(13 / 12) * 4 = 8, N' = 24
    (13, 3, 4, (8, 24)),
    # fewer rows than k units: N=5, k=4, unit 4: k' = ceil(5/4) = 2, m = ceil(5/8) * 4 = 4, N' = 8
    (5, 4, 4, (4, 8)),
])
def test_mini_batch_rows_split_into_the_embedded_count(n_rows, k, unit, want):
    m, padded = arena_mini_batch_rows(n_rows, num_mini_batches=k, mini_batch_turns=None, unit=unit)
    assert (m, padded) == want
    assert m % unit == 0 and padded % m == 0 and padded >= n_rows
    if n_rows >= k * unit:  # enough rows: the same optimizer-step count as the embedded split
        assert padded // m == len(mini_batch_slices(n_rows, num_mini_batches=k, mini_batch_size=None))


def test_mini_batch_turns_fixes_the_rows_per_mini_batch():
    # s = 10 turn-samples, unit 4: m = ceil(10/4) * 4 = 12; N = 30 -> N' = ceil(30/12) * 12 = 36, 3 steps
    # (the embedded backend: slices of 10 -> 3 steps)
    assert arena_mini_batch_rows(30, num_mini_batches=2, mini_batch_turns=10, unit=4) == (12, 36)
    assert len(mini_batch_slices(30, num_mini_batches=2, mini_batch_size=10)) == 3


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
