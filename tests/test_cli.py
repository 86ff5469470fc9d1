"""The `arena` CLI grammar (docs/design.md §F): exit 0 on success, 2 on bad input with the valid
choices listed, and nothing launched on bad input."""
import importlib.util

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
        (["train", "stepz=3"], "did you mean steps?"),
        (["train", "backend=jax"], "valid: embedded, verl"),
        (["envs", "dance"], "valid subcommands: play, check"),
        (["envs", "check", "env=nope"], "valid: alfworld"),
    ]
    if importlib.util.find_spec("vllm") is None:  # backend=verl: what is missing, before anything launches
        missing = "backend=verl cannot run here; missing: vllm"
        cases += [(["train", "backend=verl", "rollout.name=vllm", f"out={tmp_path / 'run'}"], missing),
                  (["sweep", "dimension=aggregation", "backend=verl", "rollout.name=vllm", f"results_dir={tmp_path}"],
                   missing)]
    for argv, fragment in cases:
        assert main(argv) == 2, argv
        assert fragment in capsys.readouterr().err, argv
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "run").exists()  # nothing was launched


def test_sweep_only_keys_on_a_one_config_command_exit_2_naming_arena_sweep(capsys, tmp_path):
    # `arena train seeds=3` used to run one seed and ignore seeds= silently; launcher= gave
    # Hydra's "Could not override" under a list of valid keys that named launcher itself.
    for verb, arg in (("train", "seeds=3"), ("train", "launcher=slurm"), ("bc", "fail_fast=true"),
                      ("train", "+dimension=is_clipping")):
        assert main([verb, arg, f"results_dir={tmp_path}"]) == 2
        err = capsys.readouterr().err
        key = arg.lstrip("+").split("=")[0]
        assert f"{key}= is an option of `arena sweep`" in err and f"drop {key}=" in err
    assert not any(tmp_path.iterdir())  # nothing was trained or written
