"""The dry run's wall-time estimate (arena/sweeps/dry_run.py): the measured pace of finished
cells when there are any, else the main job's calibrated pace."""
import json

import pytest
from omegaconf import OmegaConf

from arena.runs import RunFolder
from arena.sweeps.dry_run import SECONDS_PER_EPISODE, plan_lines
from arena.sweeps.sweep import build_plan

from .fake_train import VALID_SUMMARY


def _plan(tmp_path, *extra, name="est"):
    # steps=30 pinned: the derivations below count 30-step cells, whatever budget=default ships
    return build_plan(["dimension=aggregation", "seeds=2", "launcher=debug", f"name={name}", "steps=30",
                       f"results_dir={tmp_path}", "wandb.enabled=false", *extra])


def _estimate(plan, options) -> str:
    return next(line for line in plan_lines(plan, options) if "wall-time estimate" in line)


def _finish(cell_cfg, out, *, wall: float, steps: int) -> None:
    run = RunFolder(out).create()
    run.write_config(OmegaConf.to_yaml(cell_cfg))
    (run.path / "summary.json").write_text(json.dumps({**VALID_SUMMARY, "wall_seconds": wall, "steps": steps}))


def test_without_finished_cells_the_main_job_pace(tmp_path):
    # budget=default at 30 steps: 30 steps x 8 envs x 8 per group = 1920 episodes x 0.054 s = 103.68 s per
    # cell; 4 cells on the debug launcher's 1 job: 4 x 103.68 = 414.7 s = ~7 min
    plan, options = _plan(tmp_path)
    assert SECONDS_PER_EPISODE == 0.054
    line = _estimate(plan, options)
    assert "~104 s per cell, ~7 min for 4 cells on 1 job(s)" in line and "no finished cell to time" in line


def test_the_pace_of_this_sweep_s_finished_cells(tmp_path):
    # one of the 4 cells finished in 96 s over 30 steps x 8 x 8 = 1920 episodes: 0.05 s per
    # episode; the 3 others: 1920 x 0.05 = 96 s each, 3 x 96 = 288 s = ~5 min on 1 job
    plan, options = _plan(tmp_path)
    first = plan.cells[0]
    _finish(first.cfg, first.out, wall=96.0, steps=30)
    line = _estimate(plan, options)
    assert "~96 s per cell, ~5 min for 3 cells" in line and "pace of 1 finished cell(s)" in line


def test_a_collapsed_run_counts_its_logged_steps(tmp_path):
    # stopped at step 10 after 36 s: 36 / (10 x 8 x 8) = 0.05625 s per episode -> 1920 x 0.05625 = 108 s
    plan, options = _plan(tmp_path)
    _finish(plan.cells[0].cfg, plan.cells[0].out, wall=36.0, steps=10)
    assert "~108 s per cell" in _estimate(plan, options)


def test_other_sweeps_finished_cells_of_the_same_env_when_this_one_has_none(tmp_path):
    # a finished sokoban cell of another sweep (0.05 s per episode) is used; a sanity-env cell
    # (0.5 s per episode) is not: it is another environment
    other, _ = _plan(tmp_path, name="older")
    _finish(other.cells[0].cfg, other.cells[0].out, wall=96.0, steps=30)
    sanity, _ = _plan(tmp_path, "env=sanity", name="sanity-sweep")
    _finish(sanity.cells[0].cfg, sanity.cells[0].out, wall=960.0, steps=30)
    plan, options = _plan(tmp_path, name="fresh")
    assert "~96 s per cell" in _estimate(plan, options)


@pytest.mark.parametrize("summary", ['{"status": "done"', json.dumps({**VALID_SUMMARY, "wall_seconds": 0.0})])
def test_unreadable_or_untimed_cells_are_ignored(tmp_path, summary):
    plan, options = _plan(tmp_path)
    run = RunFolder(plan.cells[0].out).create()
    run.write_config(OmegaConf.to_yaml(plan.cells[0].cfg))
    (run.path / "summary.json").write_text(summary)
    assert "no finished cell to time" in _estimate(plan, options)


def test_smoke_cells_do_not_time_a_default_budget(tmp_path):
    # the smoke tour's cell (another budget) ran 30 steps x 2 envs x 4 = 240 episodes in 960 s: 4 s per
    # episode, mostly start-up. It must not price budget=default's cells (1920 x 4 = 7680 s each):
    # they get the constant, 1920 x 0.054 = 103.68 s
    smoke, _ = _plan(tmp_path, "budget=smoke", name="smoke-tour")
    _finish(smoke.cells[0].cfg, smoke.cells[0].out, wall=960.0, steps=30)
    plan, options = _plan(tmp_path, name="fresh")
    line = _estimate(plan, options)
    assert "~104 s per cell" in line and "no finished cell to time" in line
    # a smoke plan does use it: 240 episodes x 4 s = 960 s = 16 min per cell
    smoke2, options2 = _plan(tmp_path, "budget=smoke", name="smoke-two")
    assert "~16 min per cell" in _estimate(smoke2, options2)


def test_shop_and_household_at_their_own_pace(tmp_path):
    # shop at budget=default, 30 steps x 8 x 8 = 1920 episodes x 0.14 s = 268.8 s = ~4 min per cell
    # (Sokoban's 0.054 would say 104 s); household: 1920 x 0.139 = 266.9 s = ~4 min too, and an
    # env without a calibrated pace says it is guessed at Sokoban's
    plan, options = _plan(tmp_path, "env=shop", name="shop")
    line = _estimate(plan, options)
    assert "~4 min per cell" in line and "shop's pace 0.14 s per episode" in line
    plan, options = _plan(tmp_path, "env=household", name="household")
    assert "household's pace 0.139 s per episode" in _estimate(plan, options)
    plan, options = _plan(tmp_path, "env=sanity", name="sanity")
    assert "sanity: no calibrated pace, Sokoban's 0.054 s per episode (a guess)" in _estimate(plan, options)


def test_the_bc_stage_is_in_the_estimate(tmp_path):
    # 2 seeds -> 2 BC checkpoints (the seed is in the BC key), none cached: bc.steps 1500 x 0.039 s
    # = 58.5 s each, one job: 117 s; total 117 + 4 x 103.68 = 531.7 s = ~9 min
    from arena.bc.key import bc_hash

    plan, options = _plan(tmp_path)
    line = _estimate(plan, options)
    assert "BC stage ~117 s (2 of 2 checkpoint(s) to train)" in line and "total ~9 min" in line
    # seed 0's checkpoint cached after 50 s: seed 1's is priced at its sibling's 50 s
    seed0 = plan.cells[0].cfg
    (tmp_path / "bc" / bc_hash(seed0)).mkdir(parents=True)
    (tmp_path / "bc" / bc_hash(seed0) / "bc.json").write_text(json.dumps({"seconds": 50.0}))
    assert "BC stage ~50 s (1 of 2 checkpoint(s) to train)" in _estimate(plan, options)


def test_search_cells_are_in_the_estimate(tmp_path):
    from arena.sweeps.search import search_points

    plan, options = _plan(tmp_path, "search.enabled=true")
    # mode first/best: every point of each (arm, env), worst case, x the search seeds ([100])
    expected = sum(len(search_points(plan, arm, "sokoban")[0]) for arm in plan.arms) * 1
    assert expected > 0 and f"(up to {expected} cells)" in _estimate(plan, options)
