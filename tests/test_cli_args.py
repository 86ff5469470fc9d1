"""Every key a verb does not use exits 2 before any work, errors name only the close matches,
`--help` shows the values a run would get and where each is set, and a run folder records the
command that made it (docs/design.md, CLI grammar and exit codes; Run folder)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.cli import main
from arena.cli_help import help_text
from arena.config import BadConfig, cell_id, load_config
GRID_README = "sweeps/grids/README.md"  # arena.config.args.GRID_README

REPO = Path(__file__).resolve().parents[1]
# a two-arm grid of methods: sweeps here compose 2 arms x 1 env
GRID = "arms:\n  - {name: a, po.method: grpo}\n  - {name: b, po.method: gspo}\n"


def sweep(tmp_path, *args):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    return main(["sweep", f"grid={grid}", f"results_dir={tmp_path / 'results'}", "budget=smoke", *args])


@pytest.mark.parametrize("arg, fragment", [
    ("seed=5", "seeds=[5]"),  # the sweep sets each cell's seed
    ("po.method=gspo", "arm 'a' of grid 'grid' sets po.method=grpo"),  # the arm's value would win
    ("hydra.run.dir=/tmp/x", "hydra.* keys do nothing here"),
    ("device=gpu", "valid: cpu, cuda"),
    ("+foo=1", "unknown key 'foo'"),  # it did nothing, yet changed every cell id
    ("launcher.partition=foo", "configs/launcher/<name>.yaml"),
    ("envs=sokoban,shop", "env=[sokoban,shop]"),
    ("timeout_mn=5", "did you mean timeout_min?"),  # close matches among the sweep's keys too
])
def test_sweep_keys_that_would_do_nothing_exit_2_before_anything_is_written(tmp_path, capsys, arg, fragment):
    assert sweep(tmp_path, arg, "--dry-run") == 2
    err = capsys.readouterr().err
    assert err.startswith("arena sweep: ") and fragment in err, err
    assert not (tmp_path / "results").exists()


def test_launcher_slurm_without_slurm_exits_2_before_the_manifest(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no srun
    assert sweep(tmp_path, "launcher=slurm") == 2
    assert "needs SLURM's sbatch and srun" in capsys.readouterr().err
    assert not list(tmp_path.glob("results/sweeps/*/manifest.json"))


@pytest.mark.parametrize("override, fragment", [
    ("po.hp.eps_high=abc", "po.hp.eps_high='abc' is not a number (clipping=ppo takes eps_high: float)"),
    ("po.hp.norm_std=1", "po.hp.norm_std=1 is not true or false"),  # 1 is not a bool, though Python's bool is an int
])
def test_hyperparameter_values_are_checked_against_the_members_signature(override, fragment):
    with pytest.raises(BadConfig, match=fragment.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        load_config([override])
    # an integer where a float is meant is a number: eps_high=1 composes
    assert load_config(["po.hp.eps_high=1"]).po.hp.eps_high == 1


@pytest.mark.parametrize("argv, fragment", [
    (["train", "--config-name=foo"], "unknown flag '--config-name=foo' (a Hydra application flag"),
    (["bc", "--dry-run"], "valid flags: -h, --help"),
    (["sweep", "dimension=is_clipping", "--dry-run=true"], "--dry-run takes no value"),
    (["envs", "check", "n=abc"], "n='abc': valid: an integer >= 1"),
    (["train", "po.method=grpo,gspo"], GRID_README),  # Hydra's multirun syntax: arms come from a grid
    (["train", "po.methd=grpo"], "did you mean po.method?"),
    (["verl-config", "stepz=1"], "did you mean steps?"),
])
def test_bad_arguments_exit_2_with_one_line_under_one_prefix(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena {argv[0]}: ") and fragment in err and err.count("\n") == 1, err


def test_an_unknown_key_names_the_close_matches_only():
    with pytest.raises(BadConfig) as info:
        load_config(["po.methd=grpo"])
    assert "did you mean po.method?" in str(info.value)
    assert "bc.steps" not in str(info.value)  # not the ~90 valid keys
    assert (REPO / GRID_README).is_file()  # the comma-list message points at a file that exists


def test_train_cannot_run_here_exits_2_before_any_work(tmp_path, capsys):
    cases = [("model.path=Qwen/Qwen3-0.6B", "is not a folder on this machine")]
    import torch

    if not torch.cuda.is_available():
        cases += [("device=cuda", "finds no CUDA GPU here"),
                  ("backend=verl device=cuda", "backend=verl cannot run here")]  # verl's own check, before the folder
    for arg, fragment in cases:
        out = tmp_path / arg.split("=")[0]
        assert main(["train", "env=sanity", "budget=sanity", f"out={out}", *arg.split()]) == 2
        assert fragment in capsys.readouterr().err
        assert not out.exists()  # no run folder, no demo collected


def test_method_names_are_case_insensitive():
    upper, lower = load_config(["po.method=SAPO_SM"]), load_config(["po.method=sapo_sm"])
    assert upper.po.method == "sapo_sm" and cell_id(upper) == cell_id(lower)


def test_help_shows_the_values_of_the_chosen_budget_and_env_and_where_each_is_set():
    def line(text, key):
        return next(x for x in text.splitlines() if x.startswith(f"  {key}="))

    default = help_text("train")
    # configs/budget/default.yaml sets steps: 50 and batch_envs: 8 over the schema's 100 and 16
    assert line(default, "steps").startswith("  steps=50 ") and "[configs/budget/default.yaml; schema: 100]" in \
        line(default, "steps")
    assert line(default, "batch_envs").startswith("  batch_envs=8 ")
    smoke = help_text("train", ["budget=smoke", "env=shop", "lr=0.5"])
    assert "[configs/budget/smoke.yaml" in line(smoke, "steps")
    assert line(smoke, "lr").startswith("  lr=0.5 ") and "[command line" in line(smoke, "lr")
    assert line(smoke, "env.max_new_tokens").endswith("[configs/env/shop.yaml]")  # shop's 24 is the schema's
    keys = [x.split("=")[0].strip() for x in default.splitlines() if x[:2] == "  " and x[2] != " "]
    assert keys.count("env") == 1 and "env.name" not in keys and keys.count("budget") == 1
    # sweep-only: not on train (train's own launcher= submits one multi-node verl run: TrainArgs)
    assert not {"dimension", "seeds", "fail_fast"} & set(keys) and keys.count("launcher") == 1


def test_serve_and_eval_keys_have_meanings_and_version_prints(capsys):
    from arena.cli_help import VERB_HELP

    for verb in ("serve", "eval"):
        title, own = VERB_HELP[verb].sections([])[0]  # the verb's own keys, before the run config's
        assert own and all(k.doc for k in own), [k.key for k in own if not k.doc]
    assert "cpu | cuda" in next(x for x in help_text("serve").splitlines() if x.startswith("  device="))
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("arena ")


def test_help_imports_no_heavy_module_and_survives_a_closed_pipe():
    code = ("import sys, io\nfrom arena.cli import VERBS, main\n"
            "sys.stdout = io.StringIO()\n"
            "for verb in VERBS: main([verb, '--help'])\n"
            "sys.stdout = sys.__stdout__\n"
            "print(sorted(m for m in ('torch', 'pandas', 'transformers') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    # `arena help train | head -1`: the reader is gone before the help is written
    reader, writer = os.pipe()
    os.close(reader)
    closed = subprocess.run([sys.executable, "-m", "arena.cli", "help", "train"], stdout=writer, stderr=subprocess.PIPE,
                            text=True, env=env, timeout=120)
    os.close(writer)
    assert "Traceback" not in closed.stderr and "BrokenPipeError" not in closed.stderr, closed.stderr


def test_train_and_sweep_cells_record_their_command_and_log(tmp_path, monkeypatch):
    import arena.backends.embedded.run as embedded_run
    from arena.runs.run_log import COMMAND_ENV
    from arena.sweeps.job import run_cell

    def fake_training(cfg, log=print):
        print("hello from the run")
        print("a warning", file=sys.stderr)
        return 0

    monkeypatch.setattr(embedded_run, "run_training", fake_training)
    out = tmp_path / "run"
    assert main(["train", "env=sanity", "budget=sanity", f"out={out}", "steps=3"]) == 0
    command = (out / "command.txt").read_text()
    assert command.count("\n") == 1 and command.endswith(f"&& arena train env=sanity budget=sanity out={out} steps=3\n")
    log = (out / "run.log").read_text()
    assert "hello from the run" in log and "a warning" in log
    # a sweep cell records the sweep's command, passed to its job by the driver
    cfg = load_config(["env=sanity", "budget=sanity", f"out={tmp_path / 'cell'}"])
    run_cell(cfg, env={COMMAND_ENV: "arena sweep dimension=x"}, train_fn=lambda c: print("cell output") or 0)
    assert (tmp_path / "cell" / "command.txt").read_text().endswith("&& arena sweep dimension=x\n")
    assert "cell output" in (tmp_path / "cell" / "run.log").read_text()


def test_a_finished_run_is_done_on_rerun_and_its_folder_is_untouched(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "env=sanity", "budget=sanity", f"out={out}", "steps=2", "test_freq=2", "eval.n=8",
            "wandb.enabled=false"]
    assert main(args) == 0
    files = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert (out / "summary.json") in files and files[out / "command.txt"].count(b"\n") == 1
    capsys.readouterr()
    assert main(args) == 0
    assert f"[train] already done: {out / 'summary.json'}" in capsys.readouterr().out
    # nothing ran, so nothing is recorded: command.txt keeps its one start, run.log its one run
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == files


def test_the_last_budget_wins_everywhere(tmp_path):
    # Hydra composes budget=smoke (the last); `arena search` named the sweep after the first one
    from arena.sweeps.cli import search_main

    lines = []
    args = ["method=grpo", "env=sanity", "budget=sanity", "budget=smoke", "seeds=1", f"results_dir={tmp_path}", "--dry-run"]
    assert search_main(args, log=lines.append) == 0
    assert lines[0].startswith("[dry-run] sweep search-grpo-smoke ")
