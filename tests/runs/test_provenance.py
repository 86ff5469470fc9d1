"""summary.json's commit is the one a run started from (arena.runs.provenance)."""
import arena.runs.provenance as prov


def test_a_run_records_the_commit_it_started_from(monkeypatch):
    monkeypatch.delenv("ARENA_GIT_SHA", raising=False)
    monkeypatch.setattr(prov, "_PINNED", None)
    states = iter([("aaa", False), ("bbb", True)])
    monkeypatch.setattr(prov, "git_state", lambda: next(states))
    prov.pin_git_state()  # `arena train` starts at commit aaa, clean
    # the checkout moves to bbb (dirty) before the run ends: the summary still names aaa
    assert (prov.provenance()["git_sha"], prov.provenance()["git_dirty"]) == ("aaa", False)


def test_a_sweep_driver_s_record_wins(monkeypatch):
    monkeypatch.setenv("ARENA_GIT_SHA", "ccc")
    monkeypatch.setenv("ARENA_GIT_DIRTY", "1")
    monkeypatch.setattr(prov, "_PINNED", ("aaa", False))
    assert (prov.provenance()["git_sha"], prov.provenance()["git_dirty"]) == ("ccc", True)
