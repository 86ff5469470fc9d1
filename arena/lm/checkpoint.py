"""Training-state checkpoints: model, optimizer, RNG states and step, written atomically.

`<ckpt>/state.pt` is written to a temp file, fsynced, and replaced in one os.replace (then the
folder is fsynced), so a kill or a crash mid-write leaves the previous checkpoint intact
(arena.io.atomic; docs/design.md, Run folder).

The file holds only tensors and plain values (dicts, lists, numbers, strings): the RNG states
of numpy and Python are stored as integer tensors, not as pickled objects. A resume reads it
with `torch.load(weights_only=True)`, which runs no code from the file; a file that needs more
(a pickle that names any other class or function, as a planted file would) is refused with
`BadCheckpoint` and the reason (exit 2 from `arena train`)."""
from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from arena.io.atomic import atomic_write_with

STATE_FILE = "state.pt"
STATE_KEYS = ("step", "model", "optimizer", "rng")


class BadCheckpoint(ValueError):
    """A state file that cannot be read as plain tensors and values (user error: exit 2)."""


def rng_state() -> dict:
    """Every RNG the trainer draws from, as tensors and plain values."""
    bit_generator, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state(),  # (5056,) uint8
            "numpy": {"bit_generator": str(bit_generator), "keys": torch.from_numpy(keys.astype(np.int64)),  # (624,)
                      "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)},
            "python": {"version": int(version), "internal": torch.tensor(internal, dtype=torch.int64),  # (625,)
                       "gauss_next": gauss_next}}


def set_rng_state(rng: dict) -> None:
    torch.set_rng_state(rng["torch"])
    numpy = rng["numpy"]
    np.random.set_state((numpy["bit_generator"], numpy["keys"].numpy().astype(np.uint32), numpy["pos"],
                         numpy["has_gauss"], numpy["cached_gaussian"]))
    python = rng["python"]
    random.setstate((python["version"], tuple(int(x) for x in python["internal"].tolist()), python["gauss_next"]))


def save_state(ckpt_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> Path:
    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    state = {"step": int(step), "model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": rng_state()}
    return atomic_write_with(ckpt_dir / STATE_FILE, lambda tmp: torch.save(state, tmp))


def read_state(path: Path, device=None) -> dict:
    """The state file's contents, read without running code from it; BadCheckpoint with the
    reason when it holds more than tensors and plain values, or not the keys save_state writes."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, AttributeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BadCheckpoint(
            f"{path} is not a plain checkpoint (tensors and plain values only) and was not loaded: {reason}. "
            "Checkpoints written before plain checkpoints (or not by arena) are refused; "
            f"delete {path} to train this cell from step 0") from None
    if not isinstance(state, dict) or set(state) != set(STATE_KEYS):
        found = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise BadCheckpoint(f"{path} holds {found}, not the checkpoint keys {list(STATE_KEYS)}; "
                            f"delete {path} to train this cell from step 0")
    return state


def load_state(ckpt_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Optional[int]:
    """Restore the last checkpoint in place; its step, or None when there is none."""
    path = Path(ckpt_dir) / STATE_FILE
    if not path.exists():
        return None
    state = read_state(path, next(model.parameters()).device)
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        return int(state["step"])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise BadCheckpoint(f"{path} does not fit this run ({type(error).__name__}: {str(error)[:300]}); "
                            f"delete {path} to train this cell from step 0") from None
