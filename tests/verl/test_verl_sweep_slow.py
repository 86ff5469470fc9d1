"""`arena sweep dimension=is_clipping backend=verl budget=smoke seeds=1` on the CPU (slow): the
six arms (GRPO, GSPO, CISPO, SAPO, CISPO_SM, SAPO_SM) as six real verl runs, one at a time
(ARENA_MAX_PARALLEL=1: a CPU verl run holds the machine), each with its own private Ray head,
then the report. From the session's shared BC checkpoint (model.path: no BC stage), with
steps=1 to keep it short (every cell: the step-0 eval, one PPO step, the step-1 eval).

Wall time 551 s on the shared 2-core box at load 5-11 (~90 s per cell, nearly all of it Ray start-up and
verl's worker groups)."""
from __future__ import annotations

import json

import pytest

from .verl_runs import arena_env, run_arena

pytest.importorskip("verl")
pytest.importorskip("ray")

TIMEOUT_S = 1800
ARMS = ["grpo", "gspo", "cispo", "sapo", "cispo_sm", "sapo_sm"]


@pytest.mark.slow
def test_verl_is_clipping_sweep_runs_six_cells_and_writes_the_report(tmp_path, verl_bc_checkpoint):
    from arena.sweeps.status import arm_summary_rows

    code, log = run_arena(["sweep", "dimension=is_clipping", "backend=verl", "budget=smoke", "seeds=1", "steps=1",
                           f"results_dir={tmp_path}", f"model.path={verl_bc_checkpoint}", "wandb.enabled=false"],
                          timeout=TIMEOUT_S, env=arena_env(ARENA_MAX_PARALLEL="1"))
    assert code == 0, log[-4000:]
    sweep = tmp_path / "sweeps" / "is_clipping-smoke"
    summaries = [json.loads(p.read_text()) for p in sorted((sweep / "cells").glob("*/summary.json"))]
    assert len(summaries) == 6 and all(s["backend"] == "verl" and s["steps"] == 1 for s in summaries)
    rows = arm_summary_rows(tmp_path, "is_clipping-smoke")
    assert [r["arm"] for r in rows] == ARMS and all(r["done"] == 1 for r in rows)
    table = (sweep / "report" / "table.md").read_text()
    for arm in ("GRPO", "GSPO", "CISPO", "SAPO", "CISPO_SM", "SAPO_SM"):
        assert arm.lower() in table.lower(), (arm, table)
