"""Checkpoints hold only tensors and plain values, and a resume runs no code from the file
(arena/lm/checkpoint.py): a planted pickle is refused with the reason, and `arena train`
exits 2 without running it."""
import os
import pickle
import random

import numpy as np
import pytest
import torch

from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.lm.checkpoint import STATE_FILE, BadCheckpoint, load_state, save_state
from arena.runs import RunFolder


class Planted:
    """Unpickling this runs os.system (what a planted state.pt does)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def small_model():
    model = torch.nn.Linear(3, 2)
    return model, torch.optim.AdamW(model.parameters(), lr=0.1)


def test_checkpoint_restores_model_optimizer_and_every_rng_exactly(tmp_path):
    model, optimizer = small_model()
    model(torch.ones(1, 3)).sum().backward()  # (1, 2) -> scalar
    optimizer.step()  # AdamW now has exp_avg / exp_avg_sq / step per parameter
    torch.manual_seed(1), np.random.seed(2), random.seed(3), random.gauss(0, 1)  # gauss: a cached value
    save_state(tmp_path, model, optimizer, step=7)
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)], random.gauss(0, 1))
    fresh, fresh_optimizer = small_model()
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    assert load_state(tmp_path, fresh, fresh_optimizer) == 7
    got = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)], random.gauss(0, 1))
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2:] == expected[2:]
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))
    assert fresh_optimizer.state_dict()["state"][0]["exp_avg"].equal(optimizer.state_dict()["state"][0]["exp_avg"])
    # the file itself reads with weights_only=True: nothing in it needs a pickled class
    torch.load(tmp_path / STATE_FILE, weights_only=True)


def test_a_planted_state_file_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    with open(tmp_path / STATE_FILE, "wb") as f:
        pickle.dump({"step": 1, "model": Planted(marker), "optimizer": {}, "rng": {}}, f, protocol=2)
    model, optimizer = small_model()
    with pytest.raises(BadCheckpoint, match="not a plain checkpoint"):
        load_state(tmp_path, model, optimizer)
    assert not marker.exists()


def test_arena_train_exits_2_with_the_reason_on_a_planted_state_file(tmp_path, capsys):
    cfg = load_config(["env=sanity", "budget=sanity", "steps=2", "wandb.enabled=false",
                       f"results_dir={tmp_path}", f"out={tmp_path / 'run'}"])
    run = RunFolder(tmp_path / "run").create()
    run.ckpt.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "ran"
    torch.save({"step": 1, "model": Planted(marker), "optimizer": {}, "rng": {}}, run.ckpt / STATE_FILE)
    assert run_training(cfg, log=lambda *_: None) == 2
    assert not marker.exists()
    message = capsys.readouterr().err.splitlines()[-1]  # after the BC model's progress bars
    assert message.startswith("arena train: ") and "not a plain checkpoint" in message and "delete" in message
    assert "not a plain checkpoint" in run.error_file.read_text() and not run.done
