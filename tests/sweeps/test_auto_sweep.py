"""`arena sweep ... seeds=auto` end to end (the fake train fn, the in-process debug launcher):
the rounds, the manifest's record, resume after a lost cell, a failed round, bad input, the
dry run's worst case."""
import json

import pytest

from arena.sweeps.cli import sweep_main

from . import fake_train

# A grid of three arms; the fake trainer's finals per seed (fractions; points = x 100), start 0.30:
#   grpo (baseline)  50 51 52 51 50 52
#   st = grpo + [3, -3, 1, 2, -2, 1]        (points)
#   big = grpo + [10, 11, 12, 11, 10, 12]
# The grid file's dimension (g3) names no finding, so the one confirmatory family is {st - grpo,
# big - grpo} (Holm, k = 2). max_seeds=6: looks at 3, 4, 5, 6 seeds under the group-sequential bound.
# Look 1 (3 seeds): big's d = [10, 11, 12]: t = 11 sqrt 3 = 19.05, df 2, p = 1 - t / sqrt(t^2 + 2)
#   = 0.00274, above the first look's level at 0.05 / 2, alpha*(3/6) = 4 - 4 Phi(z_{1-0.025/4} / sqrt 0.5)
#   = 0.000824: not rejected, and its interval is wide: underpowered; st too. Every arm gets seed 3.
# Look 2 (4 seeds): big's d = [10, 11, 12, 11]: mean 11, sd 0.8165, t = 26.9, df 3, p = 0.000112, below
#   the level at 4 seeds (0.0034 at 0.025) -> better: big stops at 4. st [3, -3, 1, 2]: underpowered.
# Looks 3, 4: st (and grpo with it) get seeds 4, then 5. At n = 6: mean 1/3, sd 2.338, the level at 6
#   seeds and 0.025 is 0.0175 (t_{df 5} 3.64): 0.33 +- 3.64 x 2.338 / sqrt 6 = [-2.99, 3.66], inside
#   (-5, 5) -> "no difference": resolved at 6 = max_seeds; nothing grows: done.
GRID = "arms:\n  - {name: grpo, po.method: grpo}\n  - {name: st, po.method: grpo_st}\n  - {name: big, po.method: gspo}\n"
BASE = [50, 51, 52, 51, 50, 52]
FINALS = {"grpo": [b / 100 for b in BASE], "st": [(b + d) / 100 for b, d in zip(BASE, [3, -3, 1, 2, -2, 1])],
          "big": [(b + d) / 100 for b, d in zip(BASE, [10, 11, 12, 11, 10, 12])]}


@pytest.fixture
def auto_env(sweep_env, tmp_path, monkeypatch):
    import arena.analysis.figures

    # the report's figures take seconds and are not what these tests check (its table.md is)
    monkeypatch.setattr(arena.analysis.figures, "write_figures", lambda *a, **k: None)
    grid = tmp_path / "g3.yaml"
    grid.write_text(GRID)
    monkeypatch.setenv("FAKE_FINALS", json.dumps(FINALS))
    monkeypatch.setenv("FAKE_START", "0.3")
    return [f"grid={grid}", "launcher=debug", *sweep_env]


def _sweep(args, log=None):
    lines = []
    code = sweep_main(args, train_fn=fake_train.train, bc_fn=fake_train.bc, log=log or lines.append)
    return code, lines


def _manifest(tmp_path):
    return json.loads((tmp_path / "sweeps" / "g3-smoke" / "manifest.json").read_text())


def _calls(tmp_path):
    cells = tmp_path / "sweeps" / "g3-smoke" / "cells"
    return {p.name: len((p / "calls.log").read_text().split()) for p in cells.iterdir() if (p / "calls.log").exists()}


def _seeds(manifest):
    out = {}
    for c in manifest["cells"]:
        out.setdefault(c["arm"], []).append(c["seed"])
    return out


def test_rounds_until_resolved_the_record_and_resume(auto_env, tmp_path):
    code, lines = _sweep([*auto_env, "seeds=auto", "max_seeds=6"])
    assert code == 0, lines
    m = _manifest(tmp_path)
    assert _seeds(m) == {"grpo": [0, 1, 2, 3, 4, 5], "st": [0, 1, 2, 3, 4, 5], "big": [0, 1, 2, 3]}
    assert len(_calls(tmp_path)) == 16 and set(_calls(tmp_path).values()) == {1}  # each cell ran once
    # a BC stage per round for the new seeds' checkpoints (the seed is in the BC key; the arms
    # share them): seeds 0-2, then 3, 4, 5 -> 6 BC jobs
    assert (tmp_path / "bc_calls.log").read_text() == "sokoban\n" * 6
    record = m["auto_seeds"]
    assert (record["max_seeds"], record["first_seeds"], record["looks"], record["alpha"]) == (6, 3, 4, 0.05)
    assert record["bound"] == "Lan-DeMets O'Brien-Fleming" and record["families"] == {"vs grpo": ["ST - GRPO", "BIG - GRPO"]}
    assert record["baseline"] == "grpo" and record["complete"] is True
    assert record["arms"]["big"] == {"seeds": 4, "reason": "resolved at look 2 (4 seeds)",
                                     "verdicts": {"BIG - GRPO": "better"}}
    assert record["arms"]["st"] == {"seeds": 6, "reason": "resolved at look 4 (6 seeds)",
                                    "verdicts": {"ST - GRPO": "no difference"}}
    assert record["arms"]["grpo"]["seeds"] == 6
    looks = [line for line in lines if "seeds=auto look" in line]
    assert len(looks) == 4 and looks[0].endswith("-> next seed for grpo, st, big") and "done" in looks[-1]
    assert any(line.strip() == "big: 4 seeds, resolved at look 2 (4 seeds) (BIG - GRPO better)" for line in lines)
    report = (tmp_path / "sweeps" / "g3-smoke" / "report" / "table.md").read_text()
    assert "- big: 4 seeds, resolved at look 2" in report  # the report says how many seeds and why
    assert "group-sequential bound (Lan-DeMets O'Brien-Fleming alpha spending over the 4 looks" in report
    # the report's confirmatory verdicts are judged under that bound: st's interval is the look-4 one
    from arena.analysis.report import _table

    section = _table(tmp_path.resolve(), "g3-smoke", allow_mixed=True)[4]
    st = section.rows.set_index("arm").loc["st"]
    assert (round(st["low"], 2), round(st["high"], 2), st["verdict"]) == (-2.99, 3.66, "no difference")
    assert section.rows.set_index("arm").loc["big", "verdict"] == "better"

    # rerun and resume reach the same decisions
    args = [*auto_env, "seeds=auto", "max_seeds=6"]
    first = _manifest(tmp_path)
    code, lines = _sweep(args)  # the same command again: nothing runs, the same manifest
    assert code == 0 and lines[-1].startswith("[sweep] all 16 cells done"), lines[-1]
    assert _manifest(tmp_path) == first and set(_calls(tmp_path).values()) == {1}
    # a cell of round 3 (st, seed 4) lost, as if the sweep were killed while it ran: the rerun
    # replays looks 1-2 from the files, reruns that cell only, and ends where it ended
    lost = next(c["cell_id"] for c in first["cells"] if c["arm"] == "st" and c["seed"] == 4)
    (tmp_path / "sweeps" / "g3-smoke" / "cells" / lost / "summary.json").unlink()
    assert _sweep(args)[0] == 0
    assert _manifest(tmp_path) == first
    assert _calls(tmp_path) == {c["cell_id"]: 1 + (c["cell_id"] == lost) for c in first["cells"]}


def test_a_failed_round_stops_and_the_rerun_goes_on(auto_env, tmp_path, monkeypatch):
    args = [*auto_env, "seeds=auto", "max_seeds=6"]
    monkeypatch.setenv("FAKE_FAIL_ARMS", "st")
    code, _ = _sweep(args)
    assert code == 1  # round 1 cannot be judged: no second round was started
    assert _seeds(_manifest(tmp_path)) == {"grpo": [0, 1, 2], "st": [0, 1, 2], "big": [0, 1, 2]}
    assert _manifest(tmp_path)["auto_seeds"]["arms"]["st"]["reason"] == "round 1 not finished"
    monkeypatch.setenv("FAKE_FAIL_ARMS", "")
    assert _sweep(args)[0] == 0
    assert _seeds(_manifest(tmp_path)) == {"grpo": [0, 1, 2, 3, 4, 5], "st": [0, 1, 2, 3, 4, 5], "big": [0, 1, 2, 3]}


@pytest.mark.parametrize("args, words", [
    (["seeds=auto", "max_seeds=1"], "max_seeds=1: valid: an integer >= 2"),
    (["seeds=auto", "max_seeds=many"], "valid: an integer >= 2"),
    (["seeds=auto", "min_effect=-1"], "valid: a number of points > 0"),
    (["seeds=3", "max_seeds=6"], "max_seeds applies only with seeds=auto"),
    (["seeds=automatic"], "or auto"),
    (["seeds=auto", "search.enabled=true"], "seeds=auto and search.enabled=true do not go together"),
])
def test_bad_input_exits_2_naming_the_valid_values(auto_env, tmp_path, capsys, args, words):
    assert _sweep([*auto_env, *args])[0] == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "sweeps").exists()


def test_default_max_seeds_and_the_dry_run_worst_case(auto_env, tmp_path):
    code, lines = _sweep([*auto_env, "seeds=auto", "--dry-run"])
    assert code == 0
    text = "\n".join(lines)
    # the default max_seeds is 10: the worst case is 3 arms x 1 env x 10 seeds = 30 cells
    assert "seeds=auto: 3 seeds per arm first, then one more per round to each unresolved arm, up to max_seeds=10" \
           in text
    assert "worst case: 30 cells = 3 arms x 1 envs x 10 seeds" in text
    assert sum(1 for line in lines if line.startswith("  report ")) == 30
    assert "for 30 cells on 1 job(s)" in text  # the estimate is the worst case's
    assert not (tmp_path / "sweeps").exists()
