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


# search.mode=tpe over the same 4 GSPO points, with search.trials=4: the budget is every point.
# FAKE_UNSTABLE_EPS=0.2,0.0004 makes points 3 and 1 unstable (var_last20 0.01); the others have
# var 0.0. theta = 0.0025 (StabilityConfig), so the constraint var - theta is
#   points 0, 2: 0.0 - 0.0025 = -0.0025 (feasible);  points 1, 3: 0.01 - 0.0025 > 0 (infeasible).
# Scores 0.5 + eps_high: 0 -> 0.504, 1 -> 0.5004, 2 -> 0.54, 3 -> 0.7. The highest score is
# point 3's, but it is unstable, so the pick is the best feasible one: point 2.
TPE = ["search.mode=tpe", "search.trials=4"]
SCORES = {0: 0.5 + 0.004, 1: 0.5 + 0.0004, 2: 0.5 + 0.04, 3: 0.5 + 0.2}
CONSTRAINTS = {0: 0.0 - 0.0025, 1: 0.01 - 0.0025, 2: 0.0 - 0.0025, 3: 0.01 - 0.0025}


def _complete(tmp_path):
    return [t for t in _trials(tmp_path) if t.state == optuna.trial.TrialState.COMPLETE]


def _check_tpe_study(tmp_path):
    complete = _complete(tmp_path)
    assert sorted(t.params["point"] for t in complete) == [0, 1, 2, 3]  # each point evaluated once
    for t in complete:
        p = t.params["point"]
        assert t.value == SCORES[p] and t.constraints == {"stability": CONSTRAINTS[p]}
    assert not [t for t in _trials(tmp_path) if t.state == optuna.trial.TrialState.RUNNING]
    chosen = _chosen(tmp_path)
    assert chosen["mode"] == "tpe" and chosen["point"] == 2 and chosen["stable"] is True
    assert chosen["overrides"] == {"po.hp.eps_low": 0.03, "po.hp.eps_high": 0.04}
    assert {int(p): r["stable"] for p, r in chosen["trials"].items()} == {0: True, 1: False, 2: True, 3: False}


def test_tpe_records_trials_and_never_picks_an_unstable_point(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.2,0.0004")
    assert _search([*TPE, *sweep_env]) == 0
    _check_tpe_study(tmp_path)
    # Optuna's own feasibility-aware best trial is the same point
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    journal = tmp_path / "sweeps" / NAME / "search" / "gspo" / "sokoban" / "optuna.journal"
    study = optuna.load_study(study_name="gspo/sokoban", storage=JournalStorage(JournalFileBackend(str(journal))))
    assert study.best_trial.params["point"] == 2
    calls = (tmp_path / "all_calls.log").read_text().split()
    assert len(calls) == 6 and len(set(calls)) == 6  # 4 points x 1 search seed + 2 report seeds, once each
    m = json.loads((tmp_path / "sweeps" / NAME / "manifest.json").read_text())
    assert [(c["seed"], c["search_point"]) for c in m["cells"] if c["role"] == "report"] == [(0, 2), (1, 2)]


def test_tpe_killed_and_resumed_evaluates_no_point_twice(sweep_env, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.2,0.0004")
    monkeypatch.setenv("FAKE_INTERRUPT_AT", "3")  # killed while evaluating the third point (a TPE draw)
    with pytest.raises(KeyboardInterrupt):
        _search([*TPE, *sweep_env])
    killed = (tmp_path / "all_calls.log").read_text().split()[2]
    assert len(_complete(tmp_path)) == 2
    monkeypatch.setenv("FAKE_INTERRUPT_AT", "0")
    assert _search([*TPE, *sweep_env]) == 0
    _check_tpe_study(tmp_path)  # 4 complete trials, one per point, none left RUNNING
    calls = (tmp_path / "all_calls.log").read_text().split()
    # 3 calls before the kill; after it: the killed cell resumed (its trial reused), the 4th
    # point, 2 report seeds = 7 calls on 6 cells; only the killed cell ran twice
    assert len(calls) == 7 and len(set(calls)) == 6
    assert [c for c in set(calls) if calls.count(c) > 1] == [killed]


def test_tpe_search_raises_no_optuna_deprecation_or_experimental_warning(sweep_env, tmp_path, monkeypatch):
    # The installed optuna (>= 5) takes constraints through Trial.set_constraint; the deprecated
    # TPESampler(constraints_func=...) warns with a FutureWarning. The search must use the
    # current API (its constraints still reach the study: _check_tpe_study) and hide nothing.
    import warnings

    monkeypatch.setenv("FAKE_UNSTABLE_EPS", "0.2,0.0004")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _search([*TPE, *sweep_env]) == 0
    kinds = (FutureWarning, DeprecationWarning, optuna.exceptions.ExperimentalWarning)
    optuna_warnings = [str(w.message) for w in caught if issubclass(w.category, kinds) and "optuna" in w.filename]
    assert optuna_warnings == []
    _check_tpe_study(tmp_path)
