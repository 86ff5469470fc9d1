"""The metrics glossary (arena/metric_keys.py) covers every key both backends log, and
docs/design.md's glossary table is the module's table, line for line."""
import ast
import re
from pathlib import Path

import pytest
import torch

from arena.metric_keys import METRICS, VERL_FAMILIES, glossary_table, meaning

ROOT = Path(__file__).resolve().parents[1]
# a metric key literal: <family>/<name>, as both backends spell them
KEY = re.compile(r"^(train|eval|rollout|filter|adv|actor|perf|response_length|timing_s)/[A-Za-z0-9_@./-]+$")


@pytest.fixture(scope="module")
def embedded_keys(tmp_path_factory):
    """Keys of a 2-step embedded run on the one-turn sanity env with every optional term on:
    KL to the reference (kl_coef > 0), dynamic filtering and GiGPO (gigpo_ds), evals at 0, 1, 2."""
    from arena.backends.embedded.run import run_training
    from arena.config import load_config
    from arena.runs import RunFolder

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("glossary")
    cfg = load_config(["env=sanity", "budget=sanity", "steps=2", "save_freq=2", "test_freq=1", "eval.n=4", "batch_envs=2", "group_size=4",
                       "wandb.enabled=false", "po.method=gigpo_ds", "kl_coef=0.01", f"results_dir={d}",
                       f"out={d / 'run'}"])
    try:
        assert run_training(cfg, log=lambda *_: None) == 0
    finally:
        torch.set_num_threads(before)
    rows = RunFolder(d / "run").read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2]
    return set().union(*rows)


def test_every_key_of_an_embedded_run_is_in_the_glossary(embedded_keys):
    # the run exercised the optional terms, so the check covers them
    assert {"actor/kl_ref", "filter/kept_group_frac", "eval/success_rate", "actor/clipfrac_pos_adv",
            "adv/step_term_abs_ratio", "adv/step_term_corr", "adv/step_term_nonzero_frac"} <= embedded_keys
    assert sorted(embedded_keys - set(METRICS)) == []


def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_every_key_the_verl_backend_writes_is_in_the_glossary():
    # every metric-key literal in the verl backend's source (trainer metrics, loss metrics,
    # run-folder renames in both directions)
    literals = set().union(*(_string_constants(p) for p in (ROOT / "arena/backends/verl").glob("*.py")))
    keys = {s for s in literals if KEY.match(s)}
    assert {"filter/tries", "rollout/pad_rows", "actor/ppo_kl", "timing_s/step"} <= keys  # the scan finds them
    assert sorted(keys - set(METRICS)) == []
    # the loss metrics arena's verl policy loss returns (built with f-strings, so computed here)
    from arena.po.compose import policy_loss, resolve

    x = torch.zeros(1, 2)  # [B, T]
    _, metrics = policy_loss(resolve({"method": "cispo_sm"}), x, x, x, torch.ones(1, 2))
    assert sorted(set(metrics) - set(METRICS)) == []


def test_verl_families_and_unknown_keys():
    assert meaning("timing_s/gen") == VERL_FAMILIES["timing_s/"]
    assert meaning("val-core/sokoban/acc/mean@1") == VERL_FAMILIES["val-core/"]
    assert meaning("actor/kl_ref").startswith("masked mean of the k3")
    with pytest.raises(KeyError, match="not in the glossary"):
        meaning("nonsense/key")
    assert all(line and "\n" not in line and "|" not in line for line in METRICS.values())


def test_design_doc_table_matches_the_module():
    doc = (ROOT / "docs/design.md").read_text()
    table = glossary_table()
    assert table in doc, "docs/design.md's metrics glossary differs from arena/metric_keys.py: paste glossary_table()"
    # and the doc has no glossary row that the module lacks
    doc_keys = set(re.findall(r"^\| `([^`]+)` \|", doc[doc.index(table.splitlines()[0]):], flags=re.M))
    assert doc_keys == set(METRICS)


def _analysis_key_literals() -> set[str]:
    """Every string constant in arena/analysis/*.py that looks like a metric key."""
    keys = set()
    for path in sorted((ROOT / "arena/analysis").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY.match(node.value):
                keys.add(node.value)
    return keys


def test_every_key_a_figure_or_dashboard_panel_plots_is_in_the_glossary():
    from arena.analysis.figures import FIG3_PANELS, FIG4_PANELS
    from arena.analysis.wandb_dashboard import dashboard_spec
    from arena.metric_keys import PLOT_LABELS

    plotted = [p[0] for p in FIG3_PANELS + FIG4_PANELS]
    assert plotted and set(plotted) <= set(METRICS)
    # each figure panel's title, y label and range are the glossary's PLOT_LABELS entry
    assert [p[1:] for p in FIG3_PANELS + FIG4_PANELS] == [PLOT_LABELS[k] for k in plotted]
    spec = dashboard_spec({"name": "s", "dimension": "clipping", "grid": ["grpo"]}, table_markdown="|t|")
    panels = [p for block in spec["blocks"] if block["type"] == "panel_grid" for p in block["panels"]]
    assert {p["y"] for p in panels} == set(plotted)
    for p in panels:  # the dashboard shows the glossary's title, label and meaning
        assert (p["title"], p["y_label"]) == PLOT_LABELS[p["y"]][:2] and p["description"] == METRICS[p["y"]]
    # no metric key is spelled anywhere in the analysis code outside the glossary
    assert sorted(_analysis_key_literals() - set(METRICS)) == []


def test_a_plot_key_outside_the_glossary_is_an_error():
    from arena.metric_keys import panel

    assert panel("actor/grad_norm") == ("actor/grad_norm", "Grad norm", "grad norm", (0.0, None))
    with pytest.raises(KeyError, match="not in the glossary"):
        panel("eval/success")  # e.g. eval/success_rate renamed in a figure but not in METRICS
    with pytest.raises(KeyError, match="no plot label"):
        panel("perf/step_seconds")  # in the glossary, but no figure knows how to label it
