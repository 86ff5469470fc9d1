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


def test_methods_shows_the_effective_hyperparameters(capsys):
    """Every hyperparameter a run of the preset uses, the members' defaults included: GRPO's
    advantage member normalises by the std over pooled turns (group_stats, norm_std), which its
    preset does not set itself; SAPO_SM takes PPO's eps from the clipping default."""
    assert main(["methods"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")}
    assert lines["grpo"].endswith("clip_c=3.0 eps_high=0.2 eps_low=0.2 group_stats=pooled_turns norm_std=True")
    assert "group_stats=pooled_turns norm_std=True seq_mask_delta=0.003 tau_neg=1.05 tau_pos=1.0" in lines["sapo_sm"]


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


def _piped_into_true(args, tmp_path):
    """`arena ARGS | true`: the reader exits without reading, so every write to the pipe fails
    (EPIPE); (arena's exit status, its stderr)."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    arena = shlex.join([sys.executable, "-c", "import sys; from arena.cli import main; sys.exit(main())", *args])
    err = tmp_path / "stderr.txt"
    done = subprocess.run(["bash", "-c", f"{arena} 2>{shlex.quote(str(err))} | true; "
                           "echo ${PIPESTATUS[0]}"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    return int(done.stdout.split()[-1]), err.read_text()


def test_a_closed_pipe_ends_arena_methods_quietly(tmp_path):
    status, err = _piped_into_true(["methods"], tmp_path)
    assert (status, err) == (0, "")


def test_a_full_disk_is_a_clear_message_with_exit_1(monkeypatch, capsys):
    import errno

    import arena.cli as cli

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/results/sweeps/x/manifest.json")

    monkeypatch.setitem(cli.VERBS, "methods", full)
    assert main(["methods"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("arena methods: no space left on the device writing /results/sweeps/x/manifest.json "
                          "(No space left on device): free space there, or pass results_dir= on another disk")
