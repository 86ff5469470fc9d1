"""Expand a sweep into cells and validate every one (via load_config) before anything runs.

A cell = (arm, env, seed, role) with its resolved config; its folder is
`<results_dir>/sweeps/<name>/cells/<cell_id>/` (= cfg.out). The manifest maps each cell's
(arm, env, seed) to its cell_id and role (docs/design.md, Run folder and Manifest).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from arena.backends import check_trainable
from arena.config import cell_id, config_dir, to_plain
from arena.envs import first_use_notice
from arena.io.atomic import atomic_write_json
from arena.runs.layout import Results

from .compose import arm_config
from .grids import arm_overrides, override_strings

REPORT, SEARCH = "report", "search"


@dataclass
class Cell:
    arm: str
    env: str
    seed: int
    role: str
    method: str
    overrides: dict[str, Any]  # the arm's (and search point's) overrides, as in the grid
    cfg: DictConfig = field(repr=False)
    cell_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # manifest extras (search point, stable flag)

    @property
    def out(self) -> Path:
        return Path(self.cfg.out)

    def manifest_row(self) -> dict[str, Any]:
        row = {"arm": self.arm, "env": self.env, "seed": self.seed, "cell_id": self.cell_id, "role": self.role,
               "method": self.method, "overrides": self.overrides}
        row.update(self.extra)
        return row


@dataclass
class SweepPlan:
    name: str
    dimension: str
    results: Results  # the results_dir; the sweep's folder is results.sweep(name)
    arms: list[dict[str, Any]]
    envs: list[str]
    seeds: list[int]
    common: list[str]  # run overrides given to every cell (budget=, steps=, results_dir=, ...)
    cells: list[Cell] = field(default_factory=list)
    arm_sources: list[str] = field(default_factory=list)  # "<grid file>:<line>" of each arm, when from a file
    superseded: list[str] = field(default_factory=list)  # finished cells of another config this plan replaces (sweep.finished_cells_not_planned)
    auto: Optional[Any] = None  # seeds=auto settings (auto_seeds.AutoSeeds); None for fixed seeds
    worst_case: list[Cell] = field(default_factory=list)  # seeds=auto: every arm at max_seeds (auto_sweep.py)
    extra: dict[str, Any] = field(default_factory=dict)  # more manifest keys (seeds=auto: "auto_seeds")

    @property
    def sweep_dir(self) -> Path:
        return self.results.sweep(self.name)

    @property
    def manifest_file(self) -> Path:
        return self.results.manifest(self.name)

    def write_manifest(self) -> None:
        atomic_write_json(self.manifest_file, {
            "name": self.name, "dimension": self.dimension, "grid": [a["name"] for a in self.arms],
            "envs": self.envs, "seeds": self.seeds, "cells": [c.manifest_row() for c in self.cells], **self.extra,
        })


_COMPOSED: dict[tuple[str, ...], DictConfig] = {}


def base_config(common: list[str], overrides: dict[str, Any], env: str) -> DictConfig:
    """The config of one (arm, env), memoised and shared: don't modify it (make_cell copies it).
    Hydra composes once per (env, common); an arm's value overrides are applied to a copy of
    that (compose.py: Hydra's compose costs ~0.2 s). Raises BadConfig (a ValueError) listing
    the valid choices."""
    key = (str(config_dir()), f"env={env}", *common, *override_strings(overrides))
    if key not in _COMPOSED:
        base = base_config(common, {}, env) if overrides else None  # Hydra composes this one
        cfg = arm_config(common, overrides, env, base=base)
        check_trainable(cfg)
        _COMPOSED[key] = cfg
    return _COMPOSED[key]


def make_cell(base: DictConfig, *, arm: str, env: str, seed: int, role: str, overrides: dict[str, Any],
              name: str, extra: Optional[dict] = None) -> Cell:
    """Cell `name`'s (arm, env, seed) cell; its folder (cfg.out) is the cell's under the config's
    results_dir (arena.runs.layout.Results.cell)."""
    cfg = base.copy()
    OmegaConf.set_struct(cfg, False)
    cfg.seed = seed
    cfg.arm = arm
    cfg.name = name
    cfg.results_dir = str(Path(cfg.results_dir).resolve())
    cid = cell_id(cfg)
    cfg.out = str(Results.of(cfg).cell(name, cid))
    if cfg.model.path:
        cfg.model.path = str(Path(cfg.model.path).resolve())
    OmegaConf.set_struct(cfg, True)
    return Cell(arm=arm, env=env, seed=seed, role=role, method=str(cfg.po.method), overrides=overrides, cfg=cfg,
                cell_id=cid, extra=dict(extra or {}))


def first_use_notices(cells: list[Cell]) -> list[str]:
    """What the cells' environments will make on first use (arena.envs.first_use_notice), once
    per distinct environment config, in cell order."""
    notices: list[str] = []
    for cell in cells:
        notice = first_use_notice(str(cell.cfg.env.name), **to_plain(cell.cfg.env.kwargs))
        if notice and notice not in notices:
            notices.append(notice)
    return notices


def expand(plan: SweepPlan, seeds_of: Optional[dict[str, list[int]]] = None) -> list[Cell]:
    """Every (arm, env, seed) report cell, in grid order; validation errors raise ValueError.
    `seeds_of` (arm -> seeds; seeds=auto) replaces plan.seeds arm by arm."""
    cells = []
    for env in plan.envs:  # the run overrides on their own, so a bad one is named even if an arm overrides it
        base_config(plan.common, {}, env)
    for i, arm in enumerate(plan.arms):
        overrides = arm_overrides(arm)
        for env in plan.envs:
            try:
                base = base_config(plan.common, overrides, env)
            except ValueError as exc:  # name the arm, and where the grid file defines it
                where = plan.arm_sources[i] if i < len(plan.arms) and i < len(plan.arm_sources) else "grid"
                raise ValueError(f"{where}: arm {arm['name']!r}: {exc}") from exc
            for seed in plan.seeds if seeds_of is None else seeds_of[arm["name"]]:
                cells.append(make_cell(base, arm=arm["name"], env=env, seed=seed, role=REPORT, overrides=overrides,
                                       name=plan.name))
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"two arms of the grid resolve to the same config (cell ids {dup}); make the arms differ")
    return cells
