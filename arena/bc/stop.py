"""BC's stopping rule on a validation band (docs/testbed.md, BC band).

Greedy success of a BC model rises steeply over a few hundred SFT steps (a phase transition),
and where a fixed step count lands on that slope depends on the seed and on the machine's
floating-point kernels. So BC checks greedy success on `bc.val_n` validation rooms every
`bc.val_every` steps (from `bc.min_steps` on) and stops at the first check where the last
`bc.confirm` checks all have

    success_val(step) >= band[0]

Greedy success swings by +-10 points between checks 20 steps apart on the rising slope, so one
check above band[0] can be a spike that the next SFT step (or the first RL steps) undo;
`confirm: 2` waits for two in a row (docs/testbed.md, BC band).

The validation rooms are training seeds VAL_SEED_OFFSET + i (i < val_n): disjoint from the
held-out eval set (seeds >= EVAL_SEED_OFFSET) and from the demonstration rooms (seeds < demos).
`band[1]` is not a stopping condition; the report says whether the stop landed inside the band.
"""
from __future__ import annotations

from typing import Callable, Optional

from arena.config import to_plain
from arena.envs import validation_size
from arena.envs.base import VAL_SEED_OFFSET
from arena.lm.evaluate import evaluate


def val_seeds(n: int) -> list[int]:
    return [VAL_SEED_OFFSET + i for i in range(n)]


class BandStop:
    """`stop(step) -> bool` for `sft`: evaluates on the validation rooms at check steps."""

    def __init__(self, cfg, model, tokenizer, *, band: tuple[float, float], val_n: int, every: int,
                 min_steps: int, confirm: int = 1, log: Callable = print):
        if not (0.0 <= band[0] <= band[1] <= 1.0):
            raise ValueError(f"bc.band must be [low, high] with 0 <= low <= high <= 1; got {list(band)}")
        self.cfg, self.model, self.tokenizer, self.log = cfg, model, tokenizer, log
        self.band, self.seeds, self.every, self.min_steps = band, val_seeds(val_n), max(1, every), min_steps
        self.confirm = max(1, int(confirm))
        self.curve: list[tuple[int, float]] = []  # (step, validation success)
        self.split = "validation"  # "train" where the env has no validation split (from_config)

    @classmethod
    def from_config(cls, cfg, model, tokenizer, log: Callable = print) -> Optional["BandStop"]:
        band = list(cfg.bc.band or [])
        if not band:
            return None
        if len(band) != 2:
            raise ValueError(f"bc.band must be [low, high] (two numbers) or []; got {band}")
        stop = cls(cfg, model, tokenizer, band=(float(band[0]), float(band[1])), val_n=cfg.bc.val_n,
                   every=cfg.bc.val_every, min_steps=cfg.bc.min_steps, confirm=cfg.bc.confirm, log=log)
        # An env with a finite validation split smaller than val_n is refused by the config check
        # (arena.config.load.check_validation_split); a split of 0 plays training episodes.
        if validation_size(str(cfg.env.name), **to_plain(cfg.env.kwargs)) == 0:
            stop.split = "train"
            log(f"[bc] env {cfg.env.name} {to_plain(cfg.env.kwargs)} has no validation split: "
                f"the band stop checks {cfg.bc.val_n} training episodes")
        return stop

    def __call__(self, step: int) -> bool:
        at_cap = step >= self.cfg.bc.steps
        if not at_cap and (step < self.min_steps or step % self.every):
            return False
        success = evaluate(self.model, self.tokenizer, self.cfg, temperature=0.0, seeds=self.seeds)["success_rate"]
        self.model.train()  # evaluate() switched to eval mode; SFT continues
        self.curve.append((step, success))
        self.log(f"[bc] step {step}: validation success {success:.3f} (band {self.band[0]:.2f}-{self.band[1]:.2f})")
        last = [s for _, s in self.curve[-self.confirm:]]
        return len(last) == self.confirm and min(last) >= self.band[0]

    def report(self) -> dict:
        last = self.curve[-1][1] if self.curve else None
        return {"val_success": last, "val_n": len(self.seeds), "val_split": self.split, "band": list(self.band),
                "in_band": last is not None and self.band[0] <= last <= self.band[1],
                "val_curve": [list(p) for p in self.curve]}
