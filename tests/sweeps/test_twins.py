"""A cell another sweep of the same results dir finished, with the same config and code, is copied
into a new sweep instead of being trained again (arena/sweeps/twins.py), and only then.

The fake trainer (fake_train.py) records what it trains in <cell>/calls.log; here its summaries
carry the real provenance of the job (arena.runs.provenance), with the checkout's git state
pinned by `clean_checkout` so that the test does not depend on the state of the working tree."""
import json

import os
import shutil

import pandas as pd
import pytest
from omegaconf import OmegaConf

from arena.runs import RunFolder
from arena.runs.layout import COPIED_FROM_FILE
from arena.runs.provenance import package_hash, provenance
from arena.sweeps.cli import status_main, sweep_main
from arena.sweeps.twins import same_code

from . import fake_train


def _train(cfg) -> int:
    """fake_train.train, then the folder's own records agree with its summary as a real run's do
    (config.yaml; metrics rows with the first and last eval and the last step), and the summary
    gets this job's provenance (sha, dirty, code hash, versions, hooks)."""
    code = fake_train.train(cfg)
    run = RunFolder(cfg.out)
    summary = run.summary()
    run.write_config(OmegaConf.to_yaml(cfg))
    run.reset_metrics(None)
    run.append_metrics({"step": 0, "eval/success_rate": summary["initial_eval_success"]})
    run.append_metrics({"step": summary["steps"], "eval/success_rate": summary["final_eval_success"]})
    run.write_summary({**summary, **provenance()})
    return code


def _sweep(args, log=lambda *_: None):
    return sweep_main(args, train_fn=_train, bc_fn=fake_train.bc, log=log)


@pytest.fixture
def clean_checkout(monkeypatch):
    """The driver sees a clean checkout at commit 'a' * 40 (it passes that to its jobs)."""
    state = {"sha": "a" * 40, "dirty": False}
    monkeypatch.setattr("arena.runs.provenance.git_state", lambda repo=None: (state["sha"], state["dirty"]))
    return state


def _cells(tmp_path, name):
    manifest = json.loads((tmp_path / "sweeps" / name / "manifest.json").read_text())
    return {c["arm"] + f"/{c['seed']}": tmp_path / "sweeps" / name / "cells" / c["cell_id"] for c in manifest["cells"]}


def _trained(folder) -> int:
    """Training calls made in this very folder (<results_dir>/all_calls.log lists each call's
    `out`; a copied folder's calls.log is its source's, so it is not counted here)."""
    calls = folder.parents[3] / "all_calls.log"  # <results_dir>/sweeps/<name>/cells/<id>
    return calls.read_text().split().count(str(folder)) if calls.exists() else 0


def test_the_shared_grpo_cells_are_copied_not_trained_again(sweep_env, tmp_path, clean_checkout):
    # aggregation = [grpo, grpo_st], filtering = [grpo, grpo_ds, gigpo, gigpo_ds]: the two grpo
    # cells (seeds 0, 1) have the same cell id in both sweeps (the same resolved config)
    assert _sweep(["dimension=aggregation", "seeds=2", "launcher=debug", *sweep_env]) == 0
    lines = []
    assert _sweep(["dimension=filtering", "seeds=2", "launcher=debug", *sweep_env], log=lines.append) == 0
    first, second = _cells(tmp_path, "aggregation-smoke"), _cells(tmp_path, "filtering-smoke")
    for key in ("grpo/0", "grpo/1"):
        assert second[key].name == first[key].name  # the same cell id
        assert _trained(first[key]) == 1 and _trained(second[key]) == 0
        assert RunFolder(second[key], expect_cell_id=second[key].name).done
        # the copy holds the first sweep's files byte for byte (calls.log included: trained once, there)
        for path in first[key].rglob("*"):
            if path.is_file() and path.name not in (".lock", ".heartbeat"):
                assert (second[key] / path.relative_to(first[key])).read_bytes() == path.read_bytes(), path
        assert not (second[key] / ".lock").exists()
        record = json.loads((second[key] / COPIED_FROM_FILE).read_text())
        assert record["from"] == str(first[key].resolve()) and record["at"].endswith("Z") and record["command"]
    # every training call, in order: the first sweep's 4 cells, then the second's except grpo's
    calls = (tmp_path / "all_calls.log").read_text().split()
    assert sorted(calls[:4]) == sorted(str(p) for p in first.values())
    assert sorted(calls[4:]) == sorted(str(p) for k, p in second.items() if not k.startswith("grpo/"))
    assert len(second) - len(calls[4:]) == 2
    assert not (second["grpo_ds/0"] / COPIED_FROM_FILE).exists()
    assert any("2 cell(s) copied from other sweeps" in line for line in lines), lines
    # the report reads the copies as this sweep's cells: grpo (the baseline) on its 2 seeds, none
    # failed or missing, and every arm compared with it on 2 seeds
    table = pd.read_csv(tmp_path / "sweeps" / "filtering-smoke" / "report" / "table.csv")
    grpo = table[(table.arm == "grpo") & (table.env == "sokoban")].iloc[0]
    assert (grpo.n_seeds, grpo.n_failed, grpo.n_missing) == (2, 0, 0)
    assert set(table.arm) == {"grpo", "grpo_ds", "gigpo", "gigpo_ds"} and set(table.n_seeds) == {2}
    # `arena status` names the sweep each copy came from, on the copies' lines only
    lines = []
    assert status_main([f"results_dir={tmp_path}", "name=filtering-smoke"], log=lines.append) == 0
    cells = [line for line in lines[1:] if " seed=" in line]  # 4 arms x 2 seeds
    assert len(cells) == 8 and lines[0].startswith("sweep filtering-smoke (filtering): 8 cells: 8 done")
    for line in cells:
        copied = line.split()[1] == "grpo"
        # (the fake trainer's summary says steps=3 over one metrics row: status warns on every cell)
        assert line.endswith("(copied from sweep aggregation-smoke)") is copied, line


def test_reuse_false_a_new_commit_or_a_dirty_checkout_train_again(sweep_env, tmp_path, clean_checkout):
    assert _sweep(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]) == 0
    grpo = _cells(tmp_path, "aggregation-smoke")["grpo/0"]
    # reuse=false: trained by this sweep
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=own", "reuse=false", *sweep_env]) == 0
    assert _trained(_cells(tmp_path, "own")["grpo/0"]) == 1
    # a dirty checkout: the finished twin may come from other code
    clean_checkout["dirty"] = True
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=dirty", *sweep_env]) == 0
    assert _trained(_cells(tmp_path, "dirty")["grpo/0"]) == 1
    # another commit, clean: the twins (aggregation-smoke's, and own's) were trained by other code
    clean_checkout.update(sha="b" * 40, dirty=False)
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=later", *sweep_env]) == 0
    assert _trained(_cells(tmp_path, "later")["grpo/0"]) == 1
    assert _trained(grpo) == 1  # the first sweep's cell was never touched


def test_a_started_cell_of_this_sweep_or_an_unfinished_twin_is_not_replaced(sweep_env, tmp_path, clean_checkout):
    assert _sweep(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]) == 0
    twin = _cells(tmp_path, "aggregation-smoke")["grpo/0"]
    # this sweep already has a folder for the cell (a failed run): it resumes here, nothing is copied
    mine = tmp_path / "sweeps" / "filtering-smoke" / "cells" / twin.name
    mine.mkdir(parents=True)
    (mine / "error.txt").write_text("an earlier failure\n")
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", *sweep_env]) == 0
    assert _trained(mine) == 1 and not (mine / COPIED_FROM_FILE).exists()
    # twins that are not done (their summaries gone: both sweeps' folders of the cell) are no
    # proof: the cell trains
    (twin / "summary.json").unlink()
    (mine / "summary.json").unlink()
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=other", *sweep_env]) == 0
    other = _cells(tmp_path, "other")["grpo/0"]
    assert _trained(other) == 1 and not (other / COPIED_FROM_FILE).exists()


def test_dry_run_says_which_cells_it_would_copy_and_writes_nothing(sweep_env, tmp_path, clean_checkout, capsys):
    assert _sweep(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]) == 0
    lines = []
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "--dry-run", *sweep_env], log=lines.append) == 0
    text = "\n".join(lines)
    # 4 cells: grpo (a copy of aggregation-smoke's) and grpo_ds, gigpo, gigpo_ds (to run)
    assert "3 to run, 0 done, 1 to copy from other sweeps" in text, text
    assert "copy of aggregation-smoke" in text
    assert not (tmp_path / "sweeps" / "filtering-smoke").exists()


H = package_hash()  # the code hash of the files under test (any fixed string would do)


@pytest.mark.parametrize("summary, same", [
    # identity: sha s, clean, code hash H, versions v, no hooks
    ({"git_sha": "s", "git_dirty": False, "code_hash": H, "versions": {"arena": "1"}}, True),
    ({"git_sha": "s", "git_dirty": "0", "code_hash": H, "versions": {"arena": "1"}, "test_hooks": {}}, True),  # env spelling
    ({"git_sha": "s", "git_dirty": True, "code_hash": H, "versions": {"arena": "1"}}, False),  # a dirty checkout
    ({"git_sha": "s", "git_dirty": "1", "code_hash": H, "versions": {"arena": "1"}}, False),
    ({"git_sha": "s", "git_dirty": None, "code_hash": H, "versions": {"arena": "1"}}, False),  # unknown: dirty
    ({"git_sha": "s", "code_hash": H, "versions": {"arena": "1"}}, False),  # no dirty flag at all
    ({"git_sha": "s", "git_dirty": False, "versions": {"arena": "1"}}, False),  # no code record
    ({"git_sha": "s", "git_dirty": False, "code_hash": "x" * 64, "versions": {"arena": "1"}}, False),  # other files
    ({"git_sha": "t", "git_dirty": False, "code_hash": H, "versions": {"arena": "1"}}, False),  # another commit
    ({"git_sha": "s", "git_dirty": False, "code_hash": H, "versions": {"arena": "2"}}, False),  # another version
    ({"git_sha": "s", "git_dirty": False, "code_hash": H, "versions": {"arena": "1"},
      "test_hooks": {"ARENA_CRASH_AT": "x:1"}}, False),
])
def test_same_code(summary, same):
    identity = {"git_sha": "s", "git_dirty": False, "code_hash": H, "versions": {"arena": "1"}, "test_hooks": {}}
    assert same_code(summary, identity) is same


def test_no_git_means_the_package_files_decide_not_the_version_string():
    # two installs of arena 0.1.0 outside git (an sdist): the same only when their files are
    identity = {"git_sha": None, "git_dirty": None, "code_hash": H, "versions": {"arena": "0.1.0"}, "test_hooks": {}}
    assert same_code({"git_sha": None, "git_dirty": None, "code_hash": H, "versions": {"arena": "0.1.0"}}, identity)
    assert not same_code({"git_sha": None, "git_dirty": None, "code_hash": "y" * 64,
                          "versions": {"arena": "0.1.0"}}, identity)
    assert not same_code({"git_sha": None, "git_dirty": None, "versions": {"arena": "0.1.0"}}, identity)
    assert not same_code({"git_sha": "s", "git_dirty": False, "code_hash": H, "versions": {"arena": "0.1.0"}},
                         identity)


def _grpo_twin(tmp_path, sweep_env):
    """A finished first sweep; its grpo/0 cell folder (the twin a filtering sweep would copy)."""
    assert _sweep(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env]) == 0
    return _cells(tmp_path, "aggregation-smoke")["grpo/0"]


def test_a_hand_written_summary_is_no_twin(sweep_env, tmp_path, clean_checkout):
    """A sibling sweep whose cell folder holds only a summary.json (today's code record, this
    cell's id): neither its manifest, nor a config, nor metrics back it; the cell is trained."""
    twin = _grpo_twin(tmp_path, sweep_env)
    planted = tmp_path / "sweeps" / "planted" / "cells" / twin.name
    planted.mkdir(parents=True)
    summary = json.loads((twin / "summary.json").read_text())
    (planted / "summary.json").write_text(json.dumps({**summary, "final_eval_success": 0.99}))
    shutil.rmtree(twin)  # the real twin gone: only the planted one is left
    lines = []
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", *sweep_env], log=lines.append) == 0
    mine = _cells(tmp_path, "filtering-smoke")["grpo/0"]
    assert _trained(mine) == 1 and not (mine / COPIED_FROM_FILE).exists()
    assert any("not copying" in line and "planted" in line and "manifest" in line for line in lines), lines


@pytest.mark.parametrize("edit", ["metrics", "config"])
def test_a_twin_whose_records_disagree_with_its_summary_is_not_copied(sweep_env, tmp_path, clean_checkout, edit):
    twin = _grpo_twin(tmp_path, sweep_env)
    if edit == "metrics":  # the summary's final score raised by hand: metrics say otherwise
        summary = json.loads((twin / "summary.json").read_text())
        (twin / "summary.json").write_text(json.dumps({**summary, "final_eval_success": 0.99}))
    else:  # another cell's config
        (twin / "config.yaml").write_text((twin / "config.yaml").read_text().replace("seed: 0", "seed: 7"))
    lines = []
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", *sweep_env], log=lines.append) == 0
    mine = _cells(tmp_path, "filtering-smoke")["grpo/0"]
    assert _trained(mine) == 1 and not (mine / COPIED_FROM_FILE).exists()
    assert any("not copying" in line and ("metrics" if edit == "metrics" else "hashes to") in line
               for line in lines), lines


def test_a_sweep_folder_linked_from_outside_the_results_dir_is_never_followed(sweep_env, tmp_path, clean_checkout):
    """A sibling sweep folder that is a symlink to a folder outside the results dir (holding a
    complete, consistent finished cell with today's code record), and a twin with an inner
    symlink: neither is copied."""
    twin = _grpo_twin(tmp_path, sweep_env)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(tmp_path / "sweeps" / "aggregation-smoke", outside / "aggregation-smoke")
    shutil.rmtree(tmp_path / "sweeps" / "aggregation-smoke")
    os.symlink(outside / "aggregation-smoke", tmp_path / "sweeps" / "aggregation-smoke")
    lines = []
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=first", *sweep_env],
                  log=lines.append) == 0
    mine = _cells(tmp_path, "first")["grpo/0"]
    assert _trained(mine) == 1 and not (mine / COPIED_FROM_FILE).exists()
    assert any("is a symlink" in line for line in lines), lines
    # the cell trained by `first` with an inner symlink planted: not copied (nor its link)
    os.symlink(outside / "aggregation-smoke" / "manifest.json", mine / "planted-link")
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", "name=second", *sweep_env]) == 0
    second = _cells(tmp_path, "second")["grpo/0"]
    assert _trained(second) == 1 and not (second / "planted-link").exists()
    shutil.rmtree(outside)


class _FakeConfig(dict):
    def update(self, values, allow_val_change=False):
        super().update(values)


class _FakeWandbRun:
    """What wandb.init returns, recording what is logged."""

    def __init__(self, calls, kwargs):
        self.calls, self.kwargs, self.id = calls, kwargs, kwargs["id"]
        self.config, self.summary, self.logged = _FakeConfig(), {}, []
        calls.append(self)

    def log(self, row, step):
        self.logged.append((step, row))

    def finish(self):
        self.finished = True


def test_a_copied_cell_gets_its_own_wandb_run_in_the_new_sweep_s_group(sweep_env, tmp_path, clean_checkout,
                                                                       monkeypatch):
    import sys
    import types

    twin = _grpo_twin(tmp_path, sweep_env)
    (twin / "wandb_id.txt").write_text(f"{twin.name}-0123456789ab\n")  # the source's own W&B run
    (twin / "wandb").mkdir()
    (twin / "wandb" / "offline-run-x").write_text("source run")
    calls = []
    fake = types.SimpleNamespace(init=lambda **kw: _FakeWandbRun(calls, kw))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", *sweep_env, "wandb.enabled=true"]) == 0
    copy = _cells(tmp_path, "filtering-smoke")["grpo/0"]
    assert (copy / COPIED_FROM_FILE).exists() and not (copy / "wandb").exists()
    [run] = [c for c in calls if c.kwargs["job_type"] == "copy"]
    assert run.kwargs["group"] == "filtering-smoke/grpo/sokoban" and run.kwargs["dir"] == str(copy)
    assert run.id == (copy / "wandb_id.txt").read_text().strip() != f"{twin.name}-0123456789ab"
    metrics = [json.loads(line) for line in (copy / "metrics.jsonl").read_text().splitlines()]
    assert run.logged == [(r["step"], {"eval/success_rate": r["eval/success_rate"]}) for r in metrics]
    assert run.config == {"copied_from": str(twin)} and run.finished
    assert run.summary["final_eval_success"] == json.loads((copy / "summary.json").read_text())["final_eval_success"]


def test_a_full_disk_during_a_twin_copy_ends_in_a_clear_message(sweep_env, tmp_path, clean_checkout, monkeypatch,
                                                                 capsys):
    import errno

    import arena.sweeps.twins as twins_mod

    _grpo_twin(tmp_path, sweep_env)

    def full(path, fill):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(twins_mod, "atomic_write_dir", full)
    assert _sweep(["dimension=filtering", "seeds=1", "launcher=debug", *sweep_env]) == 1
    err = capsys.readouterr().err
    assert err.startswith("arena sweep: no space left on the device writing ") and "rerun the same command" in err
    assert "Traceback" not in err


def test_a_full_disk_during_a_cell_leaves_a_clear_error_not_a_traceback(tmp_path):
    import errno

    from arena.sweeps.job import run_cell

    def full(cfg):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cell" / "metrics.jsonl"))

    assert run_cell(OmegaConf.create({"out": str(tmp_path / "cell")}), env={}, train_fn=full) == "failed"
    text = (tmp_path / "cell" / "error.txt").read_text()
    assert text.startswith(f"no space left on the device writing {tmp_path / 'cell' / 'metrics.jsonl'}")
    assert "Traceback" not in text


@pytest.mark.slow  # ~20 s: three local worker processes
def test_a_local_sweep_leaves_no_empty_template_folder_in_jobs(sweep_env, tmp_path):
    """submitit's local controller makes `jobs/%j` (the template, before the job id is put in) and
    leaves it empty; the sweep removes it, keeping each job's own `jobs/<job id>/` logs."""
    assert sweep_main(["dimension=aggregation", "seeds=1", "launcher=local", *sweep_env], train_fn=fake_train.train,
                      bc_fn=fake_train.bc, log=lambda *_: None) == 0
    jobs = tmp_path / "sweeps" / "aggregation-smoke" / "jobs"
    names = {p.name for p in jobs.iterdir()}
    assert "%j" not in names and any(n.isdigit() for n in names), names
