"""A W&B dashboard (report) for one sweep, as pure data, plus an optional online save.

Runs are logged with flat config keys (docs/design.md, W&B: `po.clipping`, `env.name`, `name`, `arm`,
...), so each panel grid selects the sweep's runs with Config('name') == NAME and groups them by
one dimension (and by env, so environments never mix). The spec is built and tested offline;
`save_dashboard` needs the `wandb-workspaces` package and the network, and is only called when
WANDB_MODE=online (see report.write_report).

Spec layout:
    {"title", "description", "project", "entity", "filters": "Config('name') = '<NAME>'",
     "blocks": [{"type": "markdown", "title": "Table", "text": <table.md>},
                {"type": "panel_grid", "title": ..., "figure": "3"|"4", "groupby": [<key>, "env.name"],
                 "panels": [{"type": "line", "title": ..., "x": "step", "y": <metric>, "y_label": ...,
                             "description": <the metric's glossary line>}, ...]}, ...]}
"""
from __future__ import annotations

from typing import Any, Optional

from arena.metric_keys import meaning

from .figures import FIG3_PANELS, FIG4_PANELS

# the swept dimensions first (the issue names po.clipping and po.advantage), then the rest
GROUPINGS = ("po.clipping", "po.advantage", "po.aggregation", "po.seq_mask_delta", "po.filtering", "po.method", "arm")
ENV_KEY = "env.name"


def _panels(figure_panels) -> list[dict[str, str]]:
    """One line panel per figure panel: its title and y label from the metrics glossary's
    PLOT_LABELS, its description the glossary line (arena.metric_keys)."""
    return [{"type": "line", "title": title, "x": "step", "y": metric, "y_label": ylabel,
             "description": meaning(metric)} for metric, title, ylabel, _ in figure_panels]


def dashboard_spec(manifest: dict[str, Any], *, table_markdown: str, project: str = "arena",
                   entity: Optional[str] = None, groupings: tuple[str, ...] = GROUPINGS) -> dict[str, Any]:
    """The dashboard of sweep manifest["name"]: the table, then Fig 3 and Fig 4 panel grids per grouping."""
    name = manifest["name"]
    dimension = manifest.get("dimension")
    first = f"po.{dimension}" if dimension and f"po.{dimension}" in groupings else None
    ordered = ([first] if first else []) + [g for g in groupings if g != first]
    blocks: list[dict[str, Any]] = [{"type": "markdown", "title": "Table", "text": table_markdown}]
    for key in ordered:
        for figure, panels, label in (("3", FIG3_PANELS, "training dynamics"), ("4", FIG4_PANELS, "IS analysis")):
            blocks.append({"type": "panel_grid", "title": f"Figure {figure} ({label}), grouped by {key}",
                           "figure": figure, "groupby": [key, ENV_KEY], "panels": _panels(panels)})
    return {"title": f"arena sweep {name}", "description": f"Sweep {name} (dimension: {dimension}); arms: "
            + ", ".join(manifest["grid"]), "project": project, "entity": entity,
            "filters": f"Config('name') = '{name}'", "blocks": blocks}


def save_dashboard(spec: dict[str, Any]) -> str:
    """Publish the spec as a W&B report; returns its URL. RuntimeError when it cannot."""
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError as exc:
        raise RuntimeError("saving a W&B dashboard needs the 'wandb-workspaces' package (pip install "
                           "wandb-workspaces) and the network; the spec is kept as wandb_dashboard.json") from exc
    blocks = []
    for block in spec["blocks"]:
        if block["type"] == "markdown":
            blocks += [wr.H2(block["title"]), wr.MarkdownBlock(text=block["text"])]
            continue
        runset = wr.Runset(entity=spec["entity"], project=spec["project"], name=block["title"],
                           filters=spec["filters"], groupby=[wr.Config(k) for k in block["groupby"]])
        panels = [wr.LinePlot(title=p["title"], x="Step", y=[p["y"]], title_y=p["y_label"]) for p in block["panels"]]
        blocks += [wr.H2(block["title"]), wr.PanelGrid(runsets=[runset], panels=panels)]
    try:
        report = wr.Report(entity=spec["entity"], project=spec["project"], title=spec["title"],
                           description=spec["description"], blocks=blocks)
        report.save()
    except Exception as exc:  # network or auth: never fatal to the report
        raise RuntimeError(f"W&B report not saved ({type(exc).__name__}: {exc}); the spec is kept as wandb_dashboard.json") from exc
    return report.url
