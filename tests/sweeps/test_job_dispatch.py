"""run_cell sends each cell to its backend: verl cells run in a child process
(`python -m arena.backends.verl.main`), embedded cells in the worker itself."""
import importlib.util
import os

import pytest

from arena.config import load_config
from arena.sweeps import job
from arena.sweeps.ledger import FAILED

from .fake_train import write_valid_summary


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed: a verl cell would train")
def test_verl_cell_runs_in_a_child_process_and_fails_clearly_without_vllm(tmp_path, monkeypatch):
    # without vllm the verl entry exits 2 before training and says what is missing; the child's
    # message lands in the cell's error.txt and the cell counts as failed, never as done
    called = []
    monkeypatch.setattr("arena.backends.embedded.run.run_training", lambda cfg, **_: called.append(cfg) or 0)
    cfg = load_config(["backend=verl", "rollout.name=vllm", f"out={tmp_path / 'cell'}", f"results_dir={tmp_path}",
                       "wandb.enabled=false"])
    assert job.run_cell(cfg, env={}) == FAILED
    assert called == []  # the embedded trainer was not used for a verl cell
    assert (tmp_path / "cell" / "verl_cell.yaml").is_file()  # the child's config, resolved
    error = (tmp_path / "cell" / "error.txt").read_text()
    assert "vllm" in error
    assert not (tmp_path / "cell" / "summary.json").exists()
    # run.log: the job's header line, then what the child printed (the same message as
    # error.txt, behind "[train] "): the job's `recording` does not see a child's output
    log = (tmp_path / "cell" / "run.log").read_text()
    header, _, child = log.partition("\n")
    assert header.startswith("--- ")
    assert "[train] " + error.strip().splitlines()[0] in child


def test_embedded_cell_trains_in_process(tmp_path, monkeypatch):
    seen = []

    def fake_train(cfg, **_):
        seen.append(os.getpid())
        write_valid_summary(tmp_path / "cell")
        return 0

    monkeypatch.setattr("arena.backends.embedded.run.run_training", fake_train)
    cfg = load_config([f"out={tmp_path / 'cell'}", f"results_dir={tmp_path}", "wandb.enabled=false"])
    (tmp_path / "cell").mkdir()
    assert job.run_cell(cfg, env={}) == "done"
    assert seen == [os.getpid()]
