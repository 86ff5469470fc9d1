"""A trained RL policy leaves the run as Hugging Face model folders (docs/design.md, Run folder):
`<run>/steps/<step>/` at each save and `<run>/policy/` at the end, loadable by transformers alone,
written atomically, and accepted by `model.path` (arena train / eval / serve) as a run folder or
one of its steps."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from arena.lm.model import load_model
from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.runs import RunFolder
from arena.runs.policy import NoPolicy, policy_folder, saved_steps

ARGS = ["env=sanity", "budget=sanity", "steps=4", "save_freq=3", "test_freq=2", "eval.n=8", "wandb.enabled=false"]
TEXT = "Observation: cue b\nplan:right"  # made of the sanity tokenizer's known pieces (its vocabulary is ~16)

# Runs in a fresh interpreter (-I: no PYTHONPATH, no user site) that never imports arena: loads
# the folder with transformers' Auto classes, prints the logits of TEXT's tokens, the tokenizer's
# round trip and every arena module it ended up importing (must be none).
LOAD_WITHOUT_ARENA = """
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
path = sys.argv[1]
model = AutoModelForCausalLM.from_pretrained(path).eval()
tok = AutoTokenizer.from_pretrained(path)
ids = tok.encode(sys.argv[2], add_special_tokens=False)
with torch.no_grad():
    logits = model(torch.tensor([ids])).logits[0]
print(json.dumps({"ids": ids, "decoded": tok.decode(ids), "logits": logits.tolist(),
                  "arena": sorted(m for m in sys.modules if m == "arena" or m.startswith("arena."))}))
"""


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policy")
    cfg = load_config(ARGS + [f"results_dir={tmp}", f"out={tmp / 'run'}"])
    assert run_training(cfg, log=lambda *_: None) == 0
    return RunFolder(tmp / "run")


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]  # [T, V]


def test_every_saved_step_and_the_final_policy_are_hf_folders(trained_run):
    run = trained_run
    # save_freq=3, steps=4: saves at step 3 (3 % 3 == 0) and at the last step, 4
    assert saved_steps(run.path) == [3, 4]
    for folder in (run.step_policy(3), run.step_policy(4), run.policy):
        names = {p.name for p in folder.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names, folder
    assert not [p.name for p in run.path.iterdir() if p.name.startswith(".")]  # no temp folder left behind
    # the final policy is the model training ended with: ckpt/state.pt holds the same weights
    policy, _ = load_model(run.policy)
    state = torch.load(run.ckpt / "state.pt", weights_only=False)
    assert state["step"] == 4
    for name, tensor in policy.state_dict().items():
        assert torch.equal(tensor, state["model"][name]), name
    # ...and step 3 is an earlier model (an update happened at step 4)
    step3, _ = load_model(run.step_policy(3))
    assert any(not torch.equal(a, b) for a, b in zip(step3.state_dict().values(), policy.state_dict().values()))


def test_policy_loads_with_transformers_alone(trained_run):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-I", "-c", LOAD_WITHOUT_ARENA, str(trained_run.policy), TEXT],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["arena"] == []  # nothing of arena was imported to load it
    model, tokenizer = load_model(trained_run.policy)  # arena's own loader, for reference
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    assert got["ids"] == ids and got["decoded"] == TEXT
    assert torch.allclose(torch.tensor(got["logits"]), _logits(model, ids), atol=1e-5)


def test_model_path_takes_a_run_folder_or_one_of_its_steps(trained_run, tmp_path):
    run = trained_run
    assert policy_folder(run.path) == run.policy
    assert policy_folder(run.path / "steps" / "3") == run.step_policy(3)
    assert policy_folder(run.policy) == run.policy  # an HF folder as it is
    with pytest.raises(NoPolicy, match=r"saved no policy at step '2'.*saved steps: 3, 4"):
        policy_folder(run.path / "steps" / "2")
    # a run folder without policy/ (killed before the end, or trained before runs saved it)
    unfinished = tmp_path / "unfinished"
    shutil.copytree(run.path, unfinished, ignore=shutil.ignore_patterns("policy", "summary.json"))
    with pytest.raises(NoPolicy, match=r"no finished policy.*saved steps: 3, 4"):
        policy_folder(unfinished)
    shutil.rmtree(unfinished / "steps")
    with pytest.raises(NoPolicy, match="no saved step either"):
        policy_folder(unfinished)
    # train from a run's final policy: the loader resolves the run folder
    model, _ = load_model(run.path)
    final, _ = load_model(run.policy)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), final.state_dict().values()))


def test_eval_serve_train_exit_2_on_a_run_without_a_policy(trained_run, tmp_path, capsys):
    from arena.cli import main

    unfinished = tmp_path / "unfinished"
    shutil.copytree(trained_run.path, unfinished, ignore=shutil.ignore_patterns("policy", "summary.json"))
    for verb, extra in (("eval", ["env=sanity", "n=2", f"out={tmp_path / 'ev'}"]), ("serve", []),
                        ("train", ["env=sanity", "budget=sanity", f"results_dir={tmp_path}"])):
        assert main([verb, f"model.path={unfinished}", *extra]) == 2, verb
        err = capsys.readouterr().err
        assert f"{unfinished} is a run folder with no finished policy" in err and "saved steps: 3, 4" in err, verb
    assert main(["eval", f"model.path={trained_run.path / 'steps' / '2'}", "env=sanity", f"out={tmp_path / 'ev'}"]) == 2
    assert "saved no policy at step '2'" in capsys.readouterr().err
    assert main(["serve", f"model.path={trained_run.path / 'steps' / '2'}"]) == 2
    assert "saved no policy at step '2'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ev").exists()  # nothing was started


def test_eval_of_a_run_folder_evaluates_its_final_policy(trained_run, tmp_path):
    from arena.cli import main

    assert main(["eval", f"model.path={trained_run.path}", "env=sanity", "n=4", f"out={tmp_path / 'ev'}"]) == 0
    config = (tmp_path / "ev" / "config.yaml").read_text()
    assert f"path: {trained_run.policy}" in config  # the eval records the folder it loaded
    assert main(["eval", f"model.path={trained_run.path}/steps/3", "env=sanity", "n=4", f"out={tmp_path / 'ev3'}"]) == 0
    assert f"path: {trained_run.step_policy(3)}" in (tmp_path / "ev3" / "config.yaml").read_text()
    # the report rows name the run, not only "policy" or "steps/3"
    labels = [json.loads((tmp_path / ev / "summary.json").read_text())["label"] for ev in ("ev", "ev3")]
    assert labels == ["run/policy", "run/steps/3"]


def test_a_kill_while_writing_leaves_no_policy_folder(tmp_path):
    # ARENA_CRASH_AT=policy:1 SIGKILLs the writer after the temp folder is full and fsynced,
    # before its rename (arena.io.faults): the state a preemption at the worst moment leaves
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")
    script = ("import sys, pathlib; from arena.io.atomic import atomic_write_dir\n"
              "atomic_write_dir(pathlib.Path(sys.argv[1]), lambda tmp: (tmp / 'config.json').write_text('{}'))\n")
    env = {**os.environ, "ARENA_CRASH_AT": "policy:1"}
    out = subprocess.run([sys.executable, "-c", script, str(run / "policy")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == -9, out.stderr[-2000:]  # killed at the crash point
    assert not (run / "policy").exists()
    leftovers = [p for p in run.iterdir() if p.name.startswith(".policy.tmp-")]
    assert len(leftovers) == 1 and (leftovers[0] / "config.json").is_file()  # full, but hidden
    with pytest.raises(NoPolicy, match="no finished policy"):
        policy_folder(run)
    # the same write without the crash puts the folder in place
    env.pop("ARENA_CRASH_AT")
    out = subprocess.run([sys.executable, "-c", script, str(run / "policy")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert policy_folder(run) == run / "policy"
