"""Per-environment budgets (configs/env_budget/<env>_<budget>.yaml, Hydra's config
specialization; docs/design.md, "Per-environment budgets") and the eval-split check: an eval
never asks for more held-out episodes than the environment has distinct ones."""
from pathlib import Path

import pytest

from arena.cli import main
from arena.config.load import BadConfig, config_dir, group_options, load_config


def test_every_env_budget_file_names_an_environment_and_a_budget():
    """A file whose stem is not `<env>_<budget>` would never be loaded (Hydra looks the name up):
    a typo there silently drops an environment's calibrated values."""
    stems = sorted(p.stem for p in (config_dir() / "env_budget").glob("*.yaml"))
    valid = {f"{env}_{budget}" for env in group_options("env") for budget in group_options("budget")}
    assert stems and set(stems) <= valid, sorted(set(stems) - valid)
    assert "household_default" in stems and [s for s in stems if s.startswith("sokoban_")] == ["sokoban_default"]


def test_household_budgets_play_the_calibrated_large_pool_setting():
    # docs/testbed.md, runs HB2 + HR6: large pool, 8 turns, history 1, no penalty, 1024 demos,
    # batch 32, band [0.25, 0.45] from SFT step 600 (two checks in a row), 256 validation games.
    for budget in ("default", "stress"):
        cfg = load_config(["env=household", f"budget={budget}"])
        assert dict(cfg.env.kwargs) == {"pool": "large", "max_turns": 8}
        assert (cfg.env.history_length, cfg.env.penalty_coef) == (1, 0.0)
        assert (cfg.bc.demos, cfg.bc.batch_size, list(cfg.bc.band), cfg.bc.min_steps, cfg.bc.confirm) == (
            1024, 32, [0.25, 0.45], 600, 2)
    # the budget's own values stay: stress's lr and epochs, default's 50 steps
    assert (load_config(["env=household", "budget=stress"]).lr, load_config(["env=household"]).steps) == (3e-4, 50)
    # the command line beats the specialization
    cfg = load_config(["env=household", "bc.demos=64", "env.kwargs.max_turns=5", "env.penalty_coef=0.1"])
    assert (cfg.bc.demos, cfg.env.kwargs.max_turns, cfg.env.penalty_coef, cfg.env.kwargs.pool) == (64, 5, 0.1, "large")
    # a budget without a household file: the committed pool and the env yaml's values
    smoke = load_config(["env=household", "budget=smoke"])
    assert (dict(smoke.env.kwargs), smoke.env.history_length, smoke.bc.demos) == ({}, 2, 32)


def test_sokoban_default_is_regime_b_and_the_other_budgets_are_their_files_alone():
    """Sokoban's main job (configs/env_budget/sokoban_default.yaml; docs/testbed.md, "The main job
    under regime B"): budget=learn's wider model and band BC under 8 mini-batches x 2 epochs (16
    optimizer steps a rollout step), 50 steps, evals on 256 rooms every 10 steps with no per-step
    window, so stability is judged on the evals of steps 40 and 50. Its BC is budget=learn's
    checkpoint (same BC key). No other sokoban_* file: learn and stress are their budget files alone."""
    default = load_config(["env=sokoban", "budget=default"])
    assert (default.model.hidden, default.steps, default.lr) == (96, 50, 1.0e-4)
    assert (default.ppo_num_mini_batches, default.ppo_epochs, default.batch_envs, default.group_size) == (8, 2, 8, 8)
    assert (default.test_freq, default.eval.n, default.eval.final_window, default.stability.min_points) == (
        10, 256, False, 2)
    assert list(default.bc.band) == [0.30, 0.60] and (default.bc.min_steps, default.bc.confirm) == (300, 2)
    cfg = load_config(["env=sokoban", "budget=learn"])
    assert (cfg.model.hidden, cfg.steps, cfg.eval.n, list(cfg.bc.band)) == (96, 100, 1024, [0.30, 0.60])
    assert (cfg.ppo_num_mini_batches, cfg.ppo_epochs, cfg.test_freq, cfg.eval.final_window) == (2, 1, 20, True)
    assert dict(cfg.env.kwargs) == {"dim": 7, "num_boxes": 1, "depth": 40, "max_turns": 15, "render_wall": False}
    # the other envs' default keeps the base file's tiny model and 2 x 1 (their own files calibrate them)
    for env in ("shop", "household", "tir_math"):
        other = load_config([f"env={env}", "budget=default"])
        assert (other.model.hidden, other.ppo_num_mini_batches, other.ppo_epochs) == (None, 2, 1), env


def test_tir_math_budgets_start_from_a_converged_bc():
    # docs/testbed.md, "Converged starts" (runs TM4-TM9): level medium, 400 demos, 800 fixed SFT
    # steps, no format penalty; budget=learn keeps the tiny model (hidden 64) of those runs.
    for budget in ("default", "learn"):
        cfg = load_config(["env=tir_math", f"budget={budget}"])
        assert (cfg.env.kwargs.level, cfg.env.penalty_coef, cfg.bc.demos, cfg.bc.steps, list(cfg.bc.band)) == (
            "medium", 0.0, 400, 800, [])
        assert cfg.model.hidden is None  # the tiny preset (hidden 64), not budget=learn's 96
    assert load_config(["env=tir_math", "budget=learn"]).steps == 100


def test_an_eval_larger_than_the_eval_split_exits_2(tmp_path, capsys):
    """The committed household pool has 10 eval games: eval_seed(10) replays game 0, so eval.n=256
    would count each game's greedy outcome ~26 times as a new sample (SE sqrt(p(1-p)/256) instead
    of /10). Refused before anything runs; budget=smoke's 8 fits."""
    from arena.config.load import check_eval_split
    from arena.envs import eval_size

    assert eval_size("household") == 10 and eval_size("household", pool="large") == 256
    assert eval_size("household", pool="large", n_eval=1024) == 1024 and eval_size("sokoban") is None
    cfg = load_config(["env=household", "env.kwargs.pool=committed"])
    with pytest.raises(BadConfig, match=r"eval.n=256 .* valid: eval.n <= 10"):
        check_eval_split(cfg)
    cfg = load_config(["env=household", "env.kwargs.pool=committed", "eval.n=10"])
    with pytest.raises(BadConfig, match=r"bc.eval_n=256 .* valid: bc.eval_n <= 10"):
        check_eval_split(cfg)  # BC's own held-out eval, too
    check_eval_split(load_config(["env=household", "env.kwargs.pool=committed", "eval.n=10", "bc.eval_n=10"]))
    check_eval_split(load_config(["env=household", "env.kwargs.pool=committed", "eval.n=10",
                                  f"model.path={tmp_path}"]))  # no BC: bc.eval_n is not played
    check_eval_split(load_config(["env=household", "budget=smoke"]))
    args = ["train", "env=household", "env.kwargs.pool=committed", f"results_dir={tmp_path}", f"out={tmp_path / 'run'}"]
    assert main(args) == 2
    assert "valid: eval.n <= 10" in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "bc").exists()  # nothing written


def test_shop_budgets_stop_bc_past_its_transition_and_drop_the_penalty():
    # docs/testbed.md, "The shop task" (runs SR3, SL0, SL1): 10 turns, no format penalty, the band
    # [0.30, 0.60] checked every 100 SFT steps on 128 validation goals from step 1000 (two in a row)
    for budget in ("default", "learn", "stress"):
        cfg = load_config(["env=shop", f"budget={budget}"])
        assert (cfg.env.kwargs.max_turns, cfg.env.kwargs.n_products, cfg.env.penalty_coef) == (10, 3000, 0.0)
        assert (list(cfg.bc.band), cfg.bc.min_steps, cfg.bc.val_every, cfg.bc.val_n, cfg.bc.confirm, cfg.bc.steps) == (
            [0.30, 0.60], 1000, 100, 128, 2, 2000)
    learn = load_config(["env=shop", "budget=learn"])
    assert (learn.steps, learn.eval.n, learn.test_freq, learn.model.hidden, learn.lr) == (40, 512, 10, None, 1e-4)
    assert load_config(["env=shop", "budget=smoke"]).env.penalty_coef == 0.1  # the env yaml's
