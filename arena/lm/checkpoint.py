"""Training-state checkpoints: model, optimizer, RNG states and step, written atomically.

`<ckpt>/state.pt` is written to a temp file, fsynced, and replaced in one os.replace (then the
folder is fsynced), so a kill or a crash mid-write leaves the previous checkpoint intact
(arena.io.atomic; docs/design.md, Run folder)."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from arena.io.atomic import atomic_write_with

STATE_FILE = "state.pt"


def save_state(ckpt_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> Path:
    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
    }
    return atomic_write_with(ckpt_dir / STATE_FILE, lambda tmp: torch.save(state, tmp))


def load_state(ckpt_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Optional[int]:
    """Restore the last checkpoint in place; its step, or None when there is none."""
    path = Path(ckpt_dir) / STATE_FILE
    if not path.exists():
        return None
    state = torch.load(path, map_location=next(model.parameters()).device, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    np.random.set_state(state["rng"]["numpy"])
    random.setstate(state["rng"]["python"])
    return int(state["step"])
