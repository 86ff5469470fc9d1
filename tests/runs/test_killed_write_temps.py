"""remove_temps_of_killed_writes (arena/io/atomic.py) deletes exactly the temp file that a write
killed before its rename leaves, and nothing else in the folder."""
from __future__ import annotations

import os
import subprocess
import sys

from arena.io.atomic import remove_temps_of_killed_writes


def test_the_temp_of_a_killed_atomic_write_is_deleted_and_nothing_else(tmp_path):
    folder = tmp_path / "episodes"
    folder.mkdir()
    # a real killed write: ARENA_CRASH_AT kills the child (SIGKILL) after its temp file is written,
    # before the rename (arena/io/faults.py), so the temp's name is the one atomic_write_with makes
    script = ("import sys; from arena.io.atomic import atomic_write_text; "
              "atomic_write_text(sys.argv[1], '{\"episode\": 0}')")
    child = subprocess.run([sys.executable, "-c", script, str(folder / "0000000.json")],
                           env={**os.environ, "ARENA_CRASH_AT": "0000000.json:1"})
    assert child.returncode == -9
    (killed,) = [p for p in folder.iterdir()]
    assert killed.name.startswith(".0000000.json.") and killed.name.endswith(".tmp")
    # what must stay: a record, a visible .tmp file, atomic_write_dir's temp folder (another writer's
    # way of leaving a half folder), a temp file one level below, a symlink named like a temp
    (folder / "0000001.json").write_text("{}")
    (folder / "notes.tmp").write_text("mine")
    (folder / ".policy.tmp-abc").mkdir()
    (folder / "sub").mkdir()
    (folder / "sub" / ".0000002.json.x.tmp").write_text("{")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (folder / ".link.tmp").symlink_to(outside)
    remove_temps_of_killed_writes(folder)
    assert not killed.exists()
    assert sorted(p.name for p in folder.iterdir()) == [".link.tmp", ".policy.tmp-abc", "0000001.json",
                                                         "notes.tmp", "sub"]
    assert (folder / "sub" / ".0000002.json.x.tmp").exists() and outside.read_text() == "keep"
    remove_temps_of_killed_writes(tmp_path / "missing")  # a folder not made yet: nothing to do
