"""Bad input exits 2 before any launch, BC or write (docs/design.md, CLI grammar): each case
through the `arena` entry point, with the message naming the key and the valid values (and the
grid file and line), and the results dir left empty. The train and BC functions are fakes that
would write into the results dir, so a case that got past validation would show."""
import pytest

import arena.sweeps.cli as sweep_cli
from arena.cli import main

from . import fake_train

SWEEP = ["sweep", "dimension=aggregation", "budget=smoke", "seeds=1", "launcher=debug", "wandb.enabled=false"]


@pytest.fixture
def arena_cli(tmp_path, monkeypatch, capsys):
    """main(argv) with the fake train/BC functions; returns (exit code, stderr)."""
    real = sweep_cli.sweep_main
    monkeypatch.setattr(sweep_cli, "sweep_main", lambda args, **kw: real(args, train_fn=fake_train.train,
                                                                          bc_fn=fake_train.bc, log=lambda *_: None))
    results = tmp_path / "results"

    def run(argv):
        code = main([*argv, f"results_dir={results}"])
        assert not results.exists(), f"{argv} wrote {sorted(results.rglob('*'))}"
        return code, capsys.readouterr().err

    return run


@pytest.mark.parametrize("extra, fragments", [
    (["steps=-3"], ["steps=-3", "valid: an integer >= 1"]),
    (["seeds=[-5]"], ["seeds", "integers >= 0"]),
    (["save_freq=0"], ["save_freq=0", "valid: an integer >= 1"]),
    (["group_size=0"], ["group_size=0", "valid: an integer >= 1"]),
    (["batch_envs=0"], ["batch_envs=0", "valid: an integer >= 1"]),
    (["env.kwargs.dimm=7"], ["env.kwargs", "dimm", "valid: ", "dim, "]),
    (["timeout_min=abc"], ["timeout_min='abc'", "valid: an integer >= 1"]),
    (["timeout_min=-5"], ["timeout_min=-5", "valid: an integer >= 1"]),
    (["progress_s=abc"], ["progress_s='abc'", "valid: a number"]),
    (["seeds=[1,"], ["seeds=", "not a valid value"]),
    (["name=../../x"], ["name='../../x'", "valid: letters, digits"]),
    (["name=/tmp/elsewhere"], ["name='/tmp/elsewhere'", "valid: letters, digits"]),
    (["name=.hidden"], ["name='.hidden'", "valid: letters, digits"]),
])
def test_bad_sweep_key_exits_2_naming_key_and_valid_values(arena_cli, extra, fragments):
    code, err = arena_cli([*SWEEP, *extra])
    assert code == 2, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_empty_dimension_exits_2_with_the_dimensions(arena_cli):
    code, err = arena_cli(["sweep", "dimension=", "budget=smoke", "launcher=debug"])
    assert code == 2 and "dimension=''" in err and "valid: " in err and "aggregation" in err


def test_bad_train_keys_exit_2_before_training(tmp_path, capsys):
    for arg, fragment in (("steps=-3", "steps=-3 is out of range"), ("seed=-1", "seed=-1 is out of range"),
                          ("env.kwargs.dimm=7", "unknown env.kwargs key(s) dimm")):
        assert main(["train", arg, f"out={tmp_path / 'run'}", "wandb.enabled=false"]) == 2
        assert fragment in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# grid files: (content, fragments expected besides the file name); the line is the arm's or the error's
GRIDS = {
    "malformed": ("arms:\n  - {name: a, po.method: grpo}\n  - {name: b, po.method: [grpo}\n", [":3:", "not valid YAML"]),
    "a_list": ("- {name: a, po.method: grpo}\n", [":1:", "must be a mapping with an 'arms:' list", "valid: "]),
    "duplicate": ("arms:\n  - {name: a, po.method: grpo}\n  - {name: a, po.method: gspo}\n",
                  [":3:", "duplicate arm name 'a'", ":2"]),
    "unknown_value": ("arms:\n  - {name: a, po.method: grpo}\n  - {name: b, po.clipping: nope}\n",
                      [":3:", "arm 'b'", "nope", "valid: "]),
    "unsafe_arm": ("arms:\n  - {name: ../../evil, po.method: grpo}\n", [":2:", "name='../../evil'", "valid: letters"]),
    "no_arms": ("arms: []\n", ["non-empty list under 'arms:'"]),
}


@pytest.mark.parametrize("kind", sorted(GRIDS))
def test_bad_user_grid_exits_2_naming_file_and_line(arena_cli, tmp_path, kind):
    text, fragments = GRIDS[kind]
    grid = tmp_path / f"{kind}.yaml"
    grid.write_text(text)
    code, err = arena_cli(["sweep", f"grid={grid}", "budget=smoke", "seeds=1", "launcher=debug"])
    assert code == 2, err
    assert str(grid) in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_status_refuses_a_path_as_name(tmp_path, capsys):
    assert main(["status", "name=../../etc", f"results_dir={tmp_path}"]) == 2
    assert "name='../../etc'" in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    lines = []
    args = [*SWEEP[1:], "seeds=2", f"results_dir={tmp_path / 'results'}", "--dry-run"]
    assert sweep_cli.sweep_main(args, train_fn=fake_train.train, bc_fn=fake_train.bc, log=lines.append) == 0
    out = "\n".join(lines)
    # 2 arms (grpo, grpo_st) x 1 env x 2 seeds = 4 cell lines, each with its resolved method
    cell_lines = [line.split() for line in lines if line.startswith("  report ")]
    assert sorted((c[1], c[3], c[4]) for c in cell_lines) == [("grpo", "0", "grpo"), ("grpo", "1", "grpo"),
                                                              ("grpo_st", "0", "grpo_st"), ("grpo_st", "1", "grpo_st")]
    assert "4 cells = 2 arms x 1 envs x 2 seeds" in out and "BC stages: " in out and "wall-time estimate" in out
    assert "launcher: debug" in out
    assert not (tmp_path / "results").exists() and not (tmp_path / "bc_calls.log").exists()


def test_dry_run_says_when_a_first_use_will_generate_the_household_pool(tmp_path):
    # household at budget=default plays the large pool (configs/env_budget/household_default.yaml);
    # with an empty cache_dir the pool is not there, so the plan says what its first use makes
    lines = []
    args = ["dimension=aggregation", "budget=default", "seeds=1", "launcher=debug", "wandb.enabled=false", "env=household",
            f"env.kwargs.cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path / 'results'}", "--dry-run"]
    assert sweep_cli.sweep_main(args, train_fn=fake_train.train, bc_fn=fake_train.bc, log=lines.append) == 0
    notices = [line for line in lines if "is not in the cache" in line]
    assert len(notices) == 1 and "up to 1536 games" in notices[0], lines  # once, for the two arms' one env config
    assert not (tmp_path / "cache").exists()  # a file check: nothing generated
