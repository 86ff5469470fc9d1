import importlib.util
import json

import pytest

from arena.analysis.manifest import load_manifest
from arena.analysis.report import write_report
from arena.analysis.wandb_dashboard import GROUPINGS, dashboard_spec, save_dashboard

from .synthetic import NAME


@pytest.fixture(scope="module")
def spec(results_dir):
    return dashboard_spec(load_manifest(results_dir, NAME), table_markdown="| t |")


def test_spec_has_table_and_figure_panels_per_grouping(spec):
    assert spec["blocks"][0] == {"type": "markdown", "title": "Table", "text": "| t |"}
    grids = spec["blocks"][1:]
    # the swept dimension (clipping) first, then the others; each with a Fig 3 and a Fig 4 grid
    assert [g["groupby"][0] for g in grids[::2]] == list(GROUPINGS)
    assert {"po.clipping", "po.advantage"} <= {g["groupby"][0] for g in grids}
    assert all(g["groupby"][1] == "env.name" for g in grids)
    assert [g["figure"] for g in grids[:2]] == ["3", "4"]
    assert [p["y"] for p in grids[0]["panels"]] == ["eval/success_rate", "train/success_rate", "actor/off_policy_kl", "actor/kl_ref",
                                                    "actor/grad_norm", "rollout/format_valid_ratio"]
    assert [p["y"] for p in grids[1]["panels"]] == ["actor/clipfrac_pos_adv", "actor/clipfrac_neg_adv", "actor/masked_seqs"]
    assert all(p["x"] == "step" and p["type"] == "line" for g in grids for p in g["panels"])
    assert spec["filters"] == f"Config('name') = '{NAME}'"
    assert json.loads(json.dumps(spec)) == spec  # pure data


@pytest.mark.skipif(importlib.util.find_spec("wandb_workspaces") is not None, reason="wandb-workspaces installed")
def test_save_without_the_package_is_a_clear_error(spec):
    with pytest.raises(RuntimeError, match="wandb-workspaces"):
        save_dashboard(spec)


def test_report_writes_the_spec_offline(results_dir, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    out = write_report(results_dir, NAME, wandb=True, figures=False)
    spec = json.loads((out / "wandb_dashboard.json").read_text())
    assert spec["blocks"][0]["text"] == (out / "table.md").read_text()
    assert "offline" in capsys.readouterr().err
