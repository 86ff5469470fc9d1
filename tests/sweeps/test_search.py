"""Stability search with the fake train fn (debug launcher).

Sokoban GSPO: the preset point resolves to eps 3e-3/4e-3 (the env's po_defaults), so the table's
3e-3/4e-3 point is a duplicate and is skipped. Unique points, in order:
  0: preset (eps_high 4e-3), 1: 3e-4/4e-4, 2: 3e-2/4e-2, 3: 0.2/0.2.
The fake run's score is 0.5 + eps_high; it is unstable iff eps_high is in FAKE_UNSTABLE_EPS.
"""
import json

import optuna
import pytest

from arena.sweeps.cli import search_main

from . import fake_train

NAME = "search-gspo-smoke"


def _search(args):
    return search_main(["method=gspo", "launcher=debug", "seeds=2", "search.seeds=[100]", *args],
                       train_fn=fake_train.train, bc_fn=fake_train.bc, log=lambda *_: None)


def _chosen(tmp_path):
    return json.loads((tmp_path / "sweeps" / NAME / "search" / "gspo" / "sokoban" / "chosen.json").read_text())


def _trials(tmp_path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(tmp_path / "sweeps" / NAME / "search" / "gspo" / "sokoban" / "optuna.journal")))
    return optuna.load_study(study_name="gspo/sokoban", storage=storage).get_trials()


def test_first_stops_at_first_stable_point(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.004,0.0004")  # points 0 and 1 unstable
    assert _search(sweep_env) == 0
    chosen = _chosen(tmp_path)
    assert chosen["point"] == 2 and chosen["stable"] is True
    assert chosen["overrides"] == {"po.hp.eps_low": 0.03, "po.hp.eps_high": 0.04}
    assert sorted(chosen["trials"]) == ["0", "1", "2"]  # point 3 never evaluated
    m = json.loads((tmp_path / "sweeps" / NAME / "manifest.json").read_text())
    report = [c for c in m["cells"] if c["role"] == "report"]
    assert [(c["seed"], c["search_point"], c["search_stable"]) for c in report] == [(0, 2, True), (1, 2, True)]
    assert sum(c["role"] == "search" for c in m["cells"]) == 3


def test_best_takes_highest_stable_score(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.004,0.0004")
    assert _search(["search.mode=best", *sweep_env]) == 0
    chosen = _chosen(tmp_path)
    # stable points 2 (score 0.54) and 3 (score 0.7): best = 3
    assert chosen["point"] == 3 and chosen["result"]["score"] == pytest.approx(0.7, abs=1e-12)


def test_no_stable_point_is_explicit(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.004,0.0004,0.04,0.2")
    assert _search(sweep_env) == 0
    chosen = _chosen(tmp_path)
    # all equally unstable (var 0.01): the tie goes to the higher score, point 3
    assert chosen["stable"] is False and chosen["point"] == 3
    m = json.loads((tmp_path / "sweeps" / NAME / "manifest.json").read_text())
    assert all(c["search_stable"] is False for c in m["cells"] if c["role"] == "report")


def test_killed_search_resumes_without_reevaluating(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.004,0.0004")
    monkeypatch.setenv("FAKE_INTERRUPT_AT", "2")  # killed while evaluating point 1
    with pytest.raises(KeyboardInterrupt):
        _search(sweep_env)
    monkeypatch.setenv("FAKE_INTERRUPT_AT", "0")
    assert _search(sweep_env) == 0
    assert _chosen(tmp_path)["point"] == 2
    calls = (tmp_path / "all_calls.log").read_text().split()
    # point 0 once; point 1 killed, then resumed (same cell); point 2 once; 2 report seeds = 6 calls, 5 cells
    assert len(calls) == 6 and len(set(calls)) == 5
    points = [t.params["point"] for t in _trials(tmp_path)]
    assert sorted(points) == [0, 1, 2]  # one trial per point: the killed trial was reused


def test_search_seeds_must_be_disjoint(sweep_env, tmp_path):
    assert search_main(["method=gspo", "launcher=debug", "seeds=2", "search.seeds=[1]", *sweep_env],
                       train_fn=fake_train.train, log=lambda *_: None) == 2
    assert search_main(["method=nope", *sweep_env]) == 2
    assert not (tmp_path / "sweeps").exists()
