"""All local and offline: `arena eval policy=openai` against `arena serve` of a trained BC
checkpoint plays the same episodes as `arena eval policy=checkpoint` (greedy), which itself
equals the training run's eval; debate with 3 agents runs against the same server."""
from __future__ import annotations

import json

import torch

from arena.evaluation.episodes import load_cached
from arena.evaluation.runner import eval_main
from arena.evaluation.table import eval_table

from .eval_args import eval_args
from .conftest import ENV_ARGS

ENV = dict(arg.split("=", 1) for arg in ENV_ARGS)
COMPARED = ("seed", "won", "actions", "turns", "format_valid_turns", "action_valid_turns", "prompt_tokens",
            "completion_tokens")


def summary(path) -> dict:
    return json.loads((path / "summary.json").read_text())


def test_served_checkpoint_plays_the_same_episodes(bc_checkpoint, served_checkpoint, tmp_path):
    torch.set_num_threads(1)
    # episodes 5..20 (seed=5 is the first held-out episode); chunk=7 splits the batched
    # rollout, which must not change greedy outcomes
    common = {**ENV, "n": 16, "seed": 5}
    assert eval_main(eval_args({**common, "policy": "checkpoint", "model.path": bc_checkpoint, "chunk": 7,
                      "out": str(tmp_path / "ckpt")}), log=lambda *a: None) == 0
    # the served model gets the prompts the checkpoint was trained on (the minimal template)
    # and the same reply budget (env.max_new_tokens = 8 for this Sokoban config)
    assert eval_main(eval_args({**common, "policy": "openai", "model": "bc-tiny", "base_url": served_checkpoint,
                      "api_key_env": "", "model.prompt_template": "minimal", "max_tokens": 8, "concurrency": 3,
                      "out": str(tmp_path / "api")}), log=lambda *a: None) == 0
    local, remote = load_cached(tmp_path / "ckpt"), load_cached(tmp_path / "api")
    assert sorted(local) == sorted(remote) == list(range(5, 21))
    for i in local:
        assert {k: local[i][k] for k in COMPARED} == {k: remote[i][k] for k in COMPARED}, f"episode {i}"
    a, b = summary(tmp_path / "ckpt"), summary(tmp_path / "api")
    assert a["final_eval_success"] == b["final_eval_success"] and a["n_eval"] == b["n_eval"] == 16
    assert b["retries"] == 0 and b["requests"] == sum(r["turns"] for r in remote.values())


def test_checkpoint_eval_equals_the_training_eval(bc_checkpoint, tmp_path):
    from arena.lm.evaluate import evaluate
    from arena.lm.model import load_model
    from arena.config import load_config

    torch.set_num_threads(1)
    assert eval_main(eval_args({**ENV, "n": 16, "policy": "checkpoint", "model.path": bc_checkpoint, "chunk": 5,
                      "out": str(tmp_path / "e")}), log=lambda *a: None) == 0
    model, tokenizer = load_model(bc_checkpoint)
    cfg = load_config([*ENV_ARGS, "eval.n=16"])
    trained = evaluate(model, tokenizer, cfg, n=16)
    got = summary(tmp_path / "e")
    assert got["final_eval_success"] == trained["success_rate"]
    assert got["format_valid_ratio"] == trained["format_valid_ratio"] or abs(got["format_valid_ratio"] - trained["format_valid_ratio"]) < 1e-6


def test_three_agent_debates_run_against_the_server(served_checkpoint, tmp_path):
    torch.set_num_threads(1)
    runs = []
    for paradigm, n in (("debate", 2), ("aggressive_debate", 1)):
        out = tmp_path / paradigm
        rc = eval_main(eval_args({**ENV, "env.kwargs.max_turns": 3, "n": n, "policy": "openai", "model": "bc-tiny", "base_url": served_checkpoint,
                        "api_key_env": "", "model.prompt_template": "minimal", "max_tokens": 8,
                        "paradigm": paradigm, "debate.agents": 3, "debate.rounds": 2, "out": str(out)}),
                       log=lambda *a: None)
        assert rc == 0
        runs.append(out)
        for record in load_cached(out).values():
            # 3 agents x 2 rounds per turn, each a request with usage
            assert record["requests"] == 6 * record["turns"] and record["completion_tokens"] > 0
            assert len(record["debate"]) == record["turns"]
            for turn, action in zip(record["debate"], record["actions"]):
                assert [len(row) for row in turn["proposals"]] == [3, 3]
                # the action sent to the env is the chosen agent's final-round proposal
                assert turn["proposals"][-1][turn["chosen_agent"]] == action
        assert summary(out)["paradigm"] == paradigm
    table = eval_table(runs)
    assert "| bc-tiny | aggressive_debate |" in table and "| bc-tiny | debate |" in table
