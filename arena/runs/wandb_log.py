"""W&B logging (docs/design.md §F): offline by default, WANDB_MODE honoured, flat config keys,
group = <name>/<arm>/<env>, id = `wandb_run_id`: the cell id plus a hash of (where the run
belongs, cell id), deterministic, so a resume continues the same W&B run while the same cell
in two sweeps, or in a sweep and an `arena train` run, gets two runs that never merge.
The local metrics.jsonl stays the source of truth; W&B is a mirror."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from arena.config import resolve_po

from .layout import Results


def flat_config(cfg) -> dict[str, Any]:
    """Flat dotted keys of the resolved config, with the resolved `po.*` in place of `po`."""
    out: dict[str, Any] = {}

    def walk(node, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                out[f"{prefix}{k}"] = v

    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("po", None)
    walk(plain, "")
    out.update(resolve_po(cfg).flat())
    return out


def wandb_run_id(cfg, cell: str, run_dir: Path) -> str:
    """`<cell>-<8 hex>`: the hex is sha256 of [scope, cell], scope = "sweep:<name>" for a sweep
    cell (its folder is <results_dir>/sweeps/<name>/cells/<cell>, arena.runs.layout.Results.cell),
    else "train:<run folder>" (`arena train`, also with name=). A resume (same sweep and cell, or
    the same run folder) gets the same id; nothing else shares it."""
    folder = Path(run_dir).resolve()
    in_sweep = bool(cfg.name) and folder == Results.of(cfg).cell(str(cfg.name), cell)
    scope = f"sweep:{cfg.name}" if in_sweep else f"train:{folder}"
    digest = hashlib.sha256(json.dumps([scope, cell]).encode()).hexdigest()[:8]
    return f"{cell}-{digest}"


def wandb_init_kwargs(cfg, cell: str, run_dir: Path, *, job_type: str = "train") -> dict[str, Any]:
    name = cfg.name or "adhoc"
    arm = cfg.arm or (cfg.po.method or "custom")
    mode = cfg.wandb.mode or os.environ.get("WANDB_MODE") or "offline"
    return {
        "project": cfg.wandb.project,
        "entity": cfg.wandb.entity,
        "group": f"{name}/{arm}/{cfg.env.name}",
        "name": f"{arm}-{cfg.env.name}-s{cfg.seed}",
        "id": wandb_run_id(cfg, cell, run_dir),
        "resume": "allow",
        "job_type": job_type,
        "tags": [f"env:{cfg.env.name}", f"arm:{arm}", f"budget:{cfg.budget}", f"backend:{cfg.backend}"],
        "config": flat_config(cfg),
        "dir": str(run_dir),
        "mode": mode,
        "reinit": "finish_previous",
    }


def init_wandb(cfg, cell: str, run_dir: Path, *, job_type: str = "train") -> Optional[Any]:
    if not cfg.wandb.enabled or os.environ.get("WANDB_MODE") == "disabled":
        return None
    import wandb

    return wandb.init(**wandb_init_kwargs(cfg, cell, run_dir, job_type=job_type))
