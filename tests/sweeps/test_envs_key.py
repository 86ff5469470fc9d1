"""`arena sweep envs=[...]`: the issue's spelling of env=[...] (arena/sweeps/sweep.py)."""
from __future__ import annotations

import pytest

from arena.sweeps.sweep import build_plan


def test_envs_is_env_spelled_in_the_plural(tmp_path):
    args = ["dimension=is_clipping", "budget=smoke", "seeds=1", f"results_dir={tmp_path}"]
    plan, _ = build_plan(args + ["envs=[sokoban,household,shop]"])
    assert plan.envs == ["sokoban", "household", "shop"]
    # 6 is_clipping arms x 3 envs x 1 seed, every env in every arm
    assert len(plan.cells) == 18 and {c.env for c in plan.cells} == {"sokoban", "household", "shop"}
    assert build_plan(args + ["env=[sokoban,shop]"])[0].envs == ["sokoban", "shop"]
    with pytest.raises(ValueError, match="not both"):
        build_plan(args + ["env=sokoban", "envs=[shop]"])
