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


def test_a_key_the_backend_would_ignore_exits_2_before_anything_runs():
    # verl's eval points come from its test_freq alone: eval.final_window=false would be ignored
    with pytest.raises(BadConfig, match="eval.final_window=false is supported on backend=embedded only"):
        check_trainable(load_config(["backend=verl", "eval.final_window=false"]))
    check_trainable(load_config(["backend=embedded", "eval.final_window=false"]))
    # sort_micro_batches changes no result (only the embedded trainer's work), so a budget that
    # sets it (household_learn) stays valid on verl, which forms its own micro-batches
    check_trainable(load_config(["backend=embedded", "sort_micro_batches=true"]))
    assert BACKENDS["verl"].config_problem(load_config(["backend=verl", "env=household", "budget=learn"])) is None
