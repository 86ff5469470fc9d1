"""Two sweeps under one name at once (docs/design.md, Manifest): a live driver of other cells
makes the second command exit 2 with its manifest untouched; identical commands may overlap.
flock locks belong to an open file description, so a lock taken through one `open()` in this
process conflicts with another `open()` of the same file here, as a second process would."""
import json

import pytest

from arena.sweeps.driver_lock import SweepBusy, sweep_driver_lock
from arena.sweeps.sweep import build_plan

from .test_sweep import _manifest, _sweep


def _plan(sweep_env, *extra):
    return build_plan(["dimension=aggregation", "launcher=debug", "name=shared", *sweep_env, *extra])[0]


def test_a_live_driver_of_other_cells_blocks_the_manifest_rewrite(sweep_env, tmp_path, capsys):
    one_seed, two_seeds = _plan(sweep_env, "seeds=1"), _plan(sweep_env, "seeds=2")
    with sweep_driver_lock(one_seed):  # driver 1 is live, manifest = its cells (seed 0)
        written = (one_seed.manifest_file).read_text()
        with pytest.raises(SweepBusy, match="running now with other cells"):
            with sweep_driver_lock(two_seeds):  # seeds 0,1 differ from seed 0 only
                pass
        assert one_seed.manifest_file.read_text() == written  # not rewritten
        with sweep_driver_lock(_plan(sweep_env, "seeds=1")):  # the identical command may run beside it
            pass
        # the CLI says so and exits 2, listing nothing new in the manifest
        assert _sweep(["dimension=aggregation", "launcher=debug", "name=shared", "seeds=2", *sweep_env]) == 2
        assert one_seed.manifest_file.read_text() == written
        assert "running now with other cells" in capsys.readouterr().err
    # driver 1 ended: the same command now runs and writes its own manifest (2 seeds x arms)
    assert _sweep(["dimension=aggregation", "launcher=debug", "name=shared", "seeds=2", *sweep_env]) == 0
    seeds = {row["seed"] for row in _manifest(tmp_path, "shared")["cells"]}
    assert seeds == {0, 1}


def test_an_ended_driver_leaves_no_lock_behind(sweep_env):
    plan = _plan(sweep_env, "seeds=1")
    with sweep_driver_lock(plan):
        pass
    other = _plan(sweep_env, "seeds=2")
    with sweep_driver_lock(other):  # no SweepBusy: nobody holds the driver lock
        pass
    assert {r["seed"] for r in json.loads(other.manifest_file.read_text())["cells"]} == {0, 1}


def test_a_live_driver_blocks_another_config_of_the_same_cells(sweep_env):
    # steps=4 (the smoke budget has 3): the same arm/env/seed keys, other cell ids. Rewriting the
    # manifest would supersede the live driver's cells before they finish: exit 2 instead.
    ours, other_config = _plan(sweep_env, "seeds=1"), _plan(sweep_env, "seeds=1", "steps=4")
    assert {c.cell_id for c in ours.cells}.isdisjoint(c.cell_id for c in other_config.cells)
    with sweep_driver_lock(ours):
        written = ours.manifest_file.read_text()
        with pytest.raises(SweepBusy, match=r"running now with other cells \(2 not in this command: .*\(cell "):
            with sweep_driver_lock(other_config):
                pass
        assert ours.manifest_file.read_text() == written
