"""W&B logging (docs/design.md §F): offline by default, WANDB_MODE honoured, flat config keys,
group = <name>/<arm>/<env>, id = `wandb_run_id`: the cell id plus random hex, made once and kept
in the run folder (`wandb_id.txt`), so a resume continues the same W&B run while any other
folder (the same cell in two sweeps, two results dirs with the same sweep name, two people who
reproduce the same job) gets its own run, and runs never merge when synced.
A cell copied from another sweep (arena/sweeps/twins.py) gets its own id and is logged under
the new sweep's group (`log_copied_run`), so each sweep's W&B view is whole.
The local metrics.jsonl stays the source of truth; W&B is a mirror."""
from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from arena.config import resolve_po
from arena.io.atomic import atomic_write_text

from .folder import RunFolder
from .layout import WANDB_ID_FILE


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


def wandb_run_id(cell: str, run_dir: Path) -> str:
    """`<cell>-<12 random hex>`, read from `<run_dir>/wandb_id.txt`, or made and written there
    the first time (module docstring). A file that holds anything else is replaced."""
    path = Path(run_dir) / WANDB_ID_FILE
    try:
        kept = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    if re.fullmatch(re.escape(cell) + r"-[0-9a-f]{12}", kept):
        return kept
    made = f"{cell}-{secrets.token_hex(6)}"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, made + "\n")
    return made


def wandb_init_kwargs(cfg, cell: str, run_dir: Path, *, job_type: str = "train") -> dict[str, Any]:
    name = cfg.name or "adhoc"
    arm = cfg.arm or (cfg.po.method or "custom")
    mode = cfg.wandb.mode or os.environ.get("WANDB_MODE") or "offline"
    return {
        "project": cfg.wandb.project,
        "entity": cfg.wandb.entity,
        "group": f"{name}/{arm}/{cfg.env.name}",
        "name": f"{arm}-{cfg.env.name}-s{cfg.seed}",
        "id": wandb_run_id(cell, run_dir),
        "resume": "allow",
        "job_type": job_type,
        "tags": [f"env:{cfg.env.name}", f"arm:{arm}", f"budget:{cfg.budget}", f"backend:{cfg.backend}"],
        "config": flat_config(cfg),
        "dir": str(run_dir),
        "mode": mode,
        "reinit": "finish_previous",
    }


def wandb_enabled(cfg) -> bool:
    return bool(cfg.wandb.enabled) and os.environ.get("WANDB_MODE") != "disabled"


def init_wandb(cfg, cell: str, run_dir: Path, *, job_type: str = "train") -> Optional[Any]:
    if not wandb_enabled(cfg):
        return None
    import wandb

    return wandb.init(**wandb_init_kwargs(cfg, cell, run_dir, job_type=job_type))


def log_copied_run(cfg, cell: str, run_dir: Path, source: Path) -> bool:
    """Log a copied cell (its folder `run_dir`, copied from `source`) as a W&B run of this
    sweep: its own id, this sweep's group, job type "copy", `copied_from` in the config, each
    metrics.jsonl row at its step and the summary. False when W&B is off for `cfg`."""
    wb = init_wandb(cfg, cell, run_dir, job_type="copy")
    if wb is None:
        return False
    try:
        run = RunFolder(run_dir)
        wb.config.update({"copied_from": str(source)}, allow_val_change=True)
        for row in run.read_metrics():
            wb.log({k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}, step=row["step"])
        summary = run.summary() or {}
        wb.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool))})
    finally:
        wb.finish()
    return True
