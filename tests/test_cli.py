"""The `arena` CLI grammar (decisions §F): exit 0 on success, 2 on bad input with the valid
choices listed, and nothing launched on bad input."""
from arena.cli import main
from arena.po.methods import METHODS


def test_methods_lists_every_preset(capsys):
    assert main(["methods"]) == 0
    # one line per preset starting with its name, each followed by an indented "cites:" line
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == list(METHODS)
    assert sum("cites: paper" in line for line in lines) == len(METHODS)


def test_bad_verbs_keys_and_backends_exit_2_with_choices(capsys, tmp_path):
    cases = [
        (["frobnicate"], "valid: sweep, status"),
        (["methods", "method=gpro"], "valid: grpo"),
        (["train", "stepz=3"], "valid keys"),
        (["train", "backend=verl"], "valid for train and sweep: embedded"),
        (["sweep", "dimension=aggregation", "backend=verl", f"results_dir={tmp_path}"], "valid for train and sweep: embedded"),
        (["envs", "dance"], "valid subcommands: play, check"),
        (["envs", "check", "env=nope"], "valid: alfworld"),
    ]
    for argv, fragment in cases:
        assert main(argv) == 2, argv
        assert fragment in capsys.readouterr().err, argv
    assert not (tmp_path / "sweeps").exists()  # nothing was launched
