"""A run's trained policy as Hugging Face model folders (docs/design.md, Run folder; paths in
layout.py), for both backends:

    <run>/steps/<step>/    the policy at each saved step (every save_freq steps and the last)
    <run>/policy/          the final policy; written before summary.json, so a finished run has one

Each is a plain `save_pretrained` folder of the model and its tokenizer:
`transformers.AutoModelForCausalLM.from_pretrained(folder)` and `AutoTokenizer.from_pretrained(folder)`
load it without arena. Every folder is written atomically (`atomic_write_dir`: a temp folder,
fsynced, then one rename), so a kill never leaves a half folder under a done-looking name.

`model.path` (arena train / eval / serve) names either an HF model folder, or a run folder (its
final policy, `<run>/policy`), or one saved step of it, `<run>/steps/<step>` (itself an HF
folder): `policy_folder` maps it to the HF folder, and says what is there when it cannot.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Optional

from arena.io.atomic import atomic_write_dir
from .layout import (CONFIG_FILE, HF_CONFIG_FILE, METRICS_FILE, POLICY_DIR, STEPS_DIR, SUMMARY_FILE, policy_dir,
                     step_policy_dir)

# the files of which one must be in an HF folder for it to hold weights (not only a config)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class NoPolicy(ValueError):
    """`model.path` names a run folder (or a step of one) that holds no such policy: exit 2."""


def is_run_folder(path: Path) -> bool:
    """A folder `arena train` (or a sweep cell) wrote: config.yaml, metrics.jsonl, summary.json,
    steps/ or policy/ in it (an HF folder has config.json instead)."""
    return path.is_dir() and any((path / name).exists()
                                 for name in (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, STEPS_DIR, POLICY_DIR))


def saved_steps(run_path: Path) -> list[int]:
    """The steps whose policy folder is in `<run>/steps/`, ascending."""
    folder = Path(run_path) / STEPS_DIR
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir()
                  if p.name.isdigit() and (p / HF_CONFIG_FILE).is_file())


def _steps_hint(run_path: Path) -> str:
    steps = saved_steps(run_path)
    if not steps:
        return f"it has no saved step either ({run_path / STEPS_DIR} is empty or missing)"
    return (f"its saved steps: {', '.join(map(str, steps))}; valid: model.path={run_path / STEPS_DIR}/<step>, "
            f"e.g. model.path={step_policy_dir(run_path, steps[-1])}")


def policy_folder(path: str | os.PathLike) -> Path:
    """The HF model folder `model.path` names (module docstring): an HF folder as it is; a run
    folder -> its `policy/`; `<run>/steps/<step>` as it is. NoPolicy, saying what the run holds,
    for a run folder without a final policy or a step that was not saved. Any other path comes
    back unchanged (the loader reports it)."""
    path = Path(path)
    if (path / HF_CONFIG_FILE).is_file():
        return path
    if is_run_folder(path):
        final = policy_dir(path)
        if (final / HF_CONFIG_FILE).is_file():
            return final
        raise NoPolicy(f"{path} is a run folder with no finished policy ({POLICY_DIR}/ is missing: the run has not "
                       f"finished, or it was trained before runs saved their policy); {_steps_hint(path)}")
    if path.name == STEPS_DIR and is_run_folder(path.parent):
        raise NoPolicy(f"{path} holds one folder per saved step; {_steps_hint(path.parent)}")
    if path.parent.name == STEPS_DIR and is_run_folder(path.parent.parent):
        raise NoPolicy(f"{path}: run {path.parent.parent} saved no policy at step {path.name!r}; "
                       f"{_steps_hint(path.parent.parent)}")
    return path


def write_policy(folder: Path, model, tokenizer) -> Path:
    """`model` and `tokenizer` as an HF folder at `folder`, atomically (save_pretrained, as the
    BC checkpoints; an existing folder is replaced)."""
    from transformers.utils import logging as hf_logging

    def fill(tmp: Path) -> None:
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # one "Writing model shards" bar per save would flood the run log
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        finally:
            if bars:
                hf_logging.enable_progress_bar()

    return atomic_write_dir(folder, fill)


def link_tree(src: Path, dst: Path, edit: Optional[Callable[[Path], None]] = None) -> Path:
    """A copy of the HF folder `src` at `dst`, atomically; its files are hard links where the file
    system allows (no second copy of the weights on disk), else copies. `edit(tmp)` may then
    change the copy before it is renamed into place (replace a file, never write through a link).
    ValueError when `src` holds no config.json or no weights (e.g. a verl checkpoint saved
    without `hf_model`)."""
    src = Path(src)
    missing = [] if (src / HF_CONFIG_FILE).is_file() else [HF_CONFIG_FILE]
    if not any((src / name).is_file() for name in WEIGHT_FILES):
        missing.append(" or ".join(WEIGHT_FILES))
    if missing:
        raise ValueError(f"{src} is not a complete HF model folder: no {', '.join(missing)}")

    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:  # another file system, or links not allowed: a real copy
            shutil.copy2(source, target)

    def fill(tmp: Path) -> None:
        shutil.copytree(src, tmp, dirs_exist_ok=True, copy_function=link_or_copy)
        if edit is not None:
            edit(tmp)

    return atomic_write_dir(dst, fill)
