"""`arena eval sweep=NAME`: the final policy of every finished report cell of a sweep, evaluated
on more held-out episodes, each as one ordinary eval on the cell's own environment, then the arms
compared with the baseline under the verdict rule (arena/evaluation/sweep_eval.py).

The sweep is made by hand (a manifest and run folders trained by the embedded trainer on the
sanity env in a few seconds), so the test needs no launcher: grpo and grpo_st on seeds 0 and 1,
and a third cell (grpo_st seed 2) that never finished (no summary.json)."""
import json

import pytest

from arena.backends.embedded.run import run_training
from arena.config import load_config
from arena.evaluation.entry import eval_entry as eval_main
from arena.runs.layout import Results

from .eval_args import eval_args

NAME = "hand-sanity"
TRAIN = ["env=sanity", "budget=sanity", "steps=2", "test_freq=2", "eval.n=4", "wandb.enabled=false"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep_eval")
    cells = []
    for arm, seed in (("grpo", 0), ("grpo", 1), ("grpo_st", 0), ("grpo_st", 1), ("grpo_st", 2)):
        cell_id = f"{arm}-{seed}"
        folder = Results(root).cell(NAME, cell_id)
        cells.append({"arm": arm, "env": "sanity", "seed": seed, "cell_id": cell_id, "role": "report",
                      "method": arm, "overrides": {"po.method": arm}})
        if seed == 2:  # never finished: a config and no summary
            folder.mkdir(parents=True)
            continue
        cfg = load_config(TRAIN + [f"po.method={arm}", f"seed={seed}", f"results_dir={root}", f"out={folder}"])
        assert run_training(cfg, log=lambda *_: None) == 0
    Results(root).manifest(NAME).write_text(json.dumps({"name": NAME, "dimension": "aggregation",
                                                     "grid": ["grpo", "grpo_st"], "cells": cells}))
    return root


def test_every_finished_cell_is_one_eval_of_its_final_policy_then_the_arms_are_compared(sweep, capsys):
    lines = []
    assert eval_main(eval_args({"sweep": NAME, "results_dir": str(sweep), "n": 6, "seed": 3}), log=lines.append) == 0
    out = "\n".join(lines)
    assert "1 report cell(s) not finished, skipped: grpo_st/sanity/s2" in out
    summaries = {}
    for folder in (sweep / "evals").iterdir():
        if not folder.is_dir():
            continue
        summary = json.loads((folder / "summary.json").read_text())
        summaries[summary["label"]] = summary
        assert (summary["n_eval"], summary["first_episode"], summary["env"]) == (6, 3, "sanity")
    # one eval per finished cell, labelled <sweep>/<arm>/<env>/s<seed>, of that cell's final policy
    assert sorted(summaries) == [f"{NAME}/{a}/sanity/s{s}" for a in ("grpo", "grpo_st") for s in (0, 1)]
    config = Results(sweep).evals.glob("*/config.yaml")
    assert all(str(Results(sweep).cells(NAME)) in c.read_text() for c in config)  # model.path: a cell's policy
    # the comparison row: d_s = success_s(grpo_st) - success_s(grpo) in points, one env, mean over 2 seeds
    d = [100 * (summaries[f"{NAME}/grpo_st/sanity/s{s}"]["final_eval_success"]
                - summaries[f"{NAME}/grpo/sanity/s{s}"]["final_eval_success"]) for s in (0, 1)]
    row = next(line for line in out.splitlines() if line.startswith("| grpo_st |"))
    assert row.startswith(f"| grpo_st | 2 | {sum(d) / 2:+.1f} |")
    # the same command again plays nothing: every eval is cached
    again = []
    assert eval_main(eval_args({"sweep": NAME, "results_dir": str(sweep), "n": 6, "seed": 3}), log=again.append) == 0
    assert sum("already done" in line for line in again) == 4


@pytest.mark.parametrize("args, message", [
    ({"sweep": "nope"}, "no sweep 'nope'"),
    ({"sweep": NAME, "model.path": "/x"}, "model.path= comes from each cell"),
    ({"min_effect": 3.0}, "min_effect= compares a sweep's arms; it needs sweep=NAME"),
])
def test_bad_input_exits_2_saying_what_is_valid(sweep, capsys, args, message):
    assert eval_main(eval_args({"results_dir": str(sweep), **args}), log=lambda *_: None) == 2
    err = capsys.readouterr().err
    assert message in err
    if args.get("sweep") == "nope":
        assert f"valid: {NAME}" in err
