"""The backend table (arena/backends/__init__.py) is the one place that knows the backends."""
import importlib.util

import pytest
from omegaconf import OmegaConf

from arena.backends import BACKENDS, backend_of, check_trainable
from arena.config import BadConfig, load_config
from arena.config.schema import CHOICES


def test_table_and_schema_name_the_same_backends():
    assert tuple(BACKENDS) == CHOICES["backend"]
    for name, backend in BACKENDS.items():
        assert backend.name == name
        module, _, function = backend.train_entry.partition(":")
        assert function and importlib.util.find_spec(module) is not None  # resolvable without importing it
        if backend.cells_in_child_process:
            assert importlib.util.find_spec(backend.child_module) is not None


def test_only_verl_runs_cells_in_a_child_process_and_only_embedded_has_a_sweep_bc_stage():
    assert [n for n, b in BACKENDS.items() if b.cells_in_child_process] == ["verl"]
    assert [n for n, b in BACKENDS.items() if b.sweep_bc_stage] == ["embedded"]


def test_unknown_backend_names_the_valid_ones():
    with pytest.raises(BadConfig, match="unknown backend 'tpu'; valid: embedded, verl"):
        backend_of(OmegaConf.create({"backend": "tpu"}))


def test_missing_packages_become_the_exit_2_message(monkeypatch):
    # pretend nothing is importable: verl, ray and (rollout.name=vllm) vllm are all named
    monkeypatch.setattr("arena.backends.verl.launch.importlib.util.find_spec", lambda name: None)
    cfg = load_config(["backend=verl", "rollout.name=vllm"])
    with pytest.raises(BadConfig) as err:
        check_trainable(cfg)
    for name in ("verl (", "ray (", "vllm ("):
        assert name in str(err.value)
    check_trainable(load_config(["backend=embedded"]))  # the embedded backend needs nothing more


def test_eval_final_window_false_is_valid_on_both_backends():
    # eval.final_window=false evaluates at step 0, every test_freq steps and the last step
    # (arena/runs/stability.py, eval_steps). verl's own schedule is the same points: val_before_train
    # (step 0), then its fit validates when `is_last_step or global_steps % test_freq == 0`
    # (verl's RayPPOTrainer.fit). So verl honours it, and Sokoban's default budget, which
    # sets it (configs/env_budget/sokoban_default.yaml), runs on verl: steps 50, test_freq 10 ->
    # evals at 0, 10, 20, 30, 40, 50 on either backend.
    from arena.runs.stability import eval_steps

    cfg = load_config(["backend=verl"])
    assert cfg.eval.final_window is False and eval_steps(cfg.steps, cfg.test_freq, final_window=False) == [0, 10, 20, 30, 40, 50]
    check_trainable(cfg)
    check_trainable(load_config(["backend=embedded", "eval.final_window=false"]))
    # sort_micro_batches changes no result (only the embedded trainer's work), so a budget that
    # sets it (household_learn) stays valid on verl, which forms its own micro-batches
    check_trainable(load_config(["backend=embedded", "sort_micro_batches=true"]))
    check_trainable(load_config(["backend=verl", "env=household", "budget=learn"]))
