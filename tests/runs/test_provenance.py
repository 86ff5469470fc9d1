"""summary.json records the code the job ran, read when the job starts (arena.runs.provenance)."""
from omegaconf import OmegaConf

import arena.runs.provenance as prov
from arena.sweeps.job import run_cell


def test_a_run_records_the_commit_it_started_from(monkeypatch):
    monkeypatch.delenv("ARENA_GIT_SHA", raising=False)
    monkeypatch.setattr(prov, "_PINNED", None)
    states = iter([("aaa", False), ("bbb", True)])
    monkeypatch.setattr(prov, "git_state", lambda: next(states))
    prov.pin_code_state()  # `arena train` starts at commit aaa, clean
    # the checkout moves to bbb (dirty) before the run ends: the summary still names aaa
    assert (prov.provenance()["git_sha"], prov.provenance()["git_dirty"]) == ("aaa", False)
    assert prov.provenance()["code_hash"] == prov.package_hash()


def test_a_job_records_its_own_code_not_the_driver_s_at_the_sweep_s_start(monkeypatch, tmp_path):
    """The driver read commit ccc, clean, when the sweep started (and hands it to its jobs);
    the checkout was edited before these cells ran: each cell records what it started with."""
    monkeypatch.setenv("ARENA_GIT_SHA", "c" * 40)
    monkeypatch.setenv("ARENA_GIT_DIRTY", "0")
    monkeypatch.setattr(prov, "_PINNED", None)
    states = iter([("c" * 40, True), ("d" * 40, False)])  # cell 1: edited; cell 2: committed as ddd
    monkeypatch.setattr(prov, "git_state", lambda: next(states))
    recorded = []

    def train(cfg):
        recorded.append((prov.provenance()["git_sha"], prov.provenance()["git_dirty"]))
        return 1

    for name in ("cell1", "cell2"):
        cfg = OmegaConf.create({"out": str(tmp_path / name)})
        run_cell(cfg, env={"ARENA_GIT_SHA": "c" * 40, "ARENA_GIT_DIRTY": "0"}, train_fn=train)
    assert recorded == [("c" * 40, True), ("d" * 40, False)]


def test_files_changed_since_the_process_started_count_as_dirty(monkeypatch):
    monkeypatch.setattr(prov, "git_state", lambda: ("aaa", False))
    assert prov.code_state() == {"git_sha": "aaa", "git_dirty": False, "code_hash": prov.package_hash()}
    monkeypatch.setattr(prov, "_STARTED_WITH", "0" * 64)  # the process imported other files
    assert prov.code_state()["git_dirty"] is True


def test_outside_git_the_snapshot_records_the_driver_s_commit_and_its_own_files(monkeypatch):
    monkeypatch.setattr(prov, "git_state", lambda: (None, None))
    monkeypatch.delenv("ARENA_GIT_SHA", raising=False)
    assert prov.code_state() == {"git_sha": None, "git_dirty": None, "code_hash": prov.package_hash()}
    monkeypatch.setenv("ARENA_GIT_SHA", "e" * 40)  # a SLURM job's snapshot of the driver's checkout
    monkeypatch.setenv("ARENA_GIT_DIRTY", "0")
    assert prov.code_state()["git_sha"] == "e" * 40 and prov.code_state()["git_dirty"] is False
    monkeypatch.delenv("ARENA_GIT_DIRTY")  # the dirty flag not handed over: unknown counts as dirty
    assert prov.code_state()["git_dirty"] is True


def test_package_hash_reads_every_file_but_bytecode(tmp_path):
    """sha256 over (relative path, bytes) in sorted order: a changed byte or a new module
    changes it; __pycache__ does not (snapshot_code leaves it out too)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.yaml").write_text("k: v\n")
    first = prov.package_hash(tmp_path)
    assert first == prov.package_hash(tmp_path) and len(first) == 64
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "sub" / "c.pyc").write_bytes(b"\0")
    assert prov.package_hash(tmp_path) == first
    (tmp_path / "a.py").write_text("x = 2\n")
    second = prov.package_hash(tmp_path)
    (tmp_path / "new.py").write_text("")  # an untracked module git's dirty flag would miss
    assert len({first, second, prov.package_hash(tmp_path)}) == 3


def test_git_state_is_the_checkout_s_only_where_git_tracks_the_package(tmp_path):
    """A snapshot of the package (SLURM jobs import one) inside some other checkout, untracked
    there, is not that checkout's code: (None, None). Committed into that checkout (arena inside a
    larger repository), it is: that commit, clean."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = tmp_path / "other"
    shutil.copytree(Path(prov.__file__).resolve().parents[1], repo / "snap" / "arena",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (repo / "README").write_text("x")
    subprocess.run(git + ["add", "README"], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)

    def state_seen_by_the_snapshot():
        probe = "from arena.runs.provenance import git_state; print(git_state())"
        return subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                              env={"PYTHONPATH": str(repo / "snap"), "PATH": "/usr/bin:/bin"}).stdout.strip()

    assert state_seen_by_the_snapshot() == "(None, None)"
    subprocess.run(git + ["add", "snap"], check=True)
    subprocess.run(git + ["commit", "-qm", "arena inside"], check=True)
    head = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert state_seen_by_the_snapshot() == f"('{head}', False)"
