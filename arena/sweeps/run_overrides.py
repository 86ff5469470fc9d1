"""The run overrides of `arena sweep` that would do nothing: refused before anything is written
(docs/design.md, CLI grammar and exit codes). The sweep gives each cell its seed and its arm's
keys after the command line's, so on the command line those keys would lose silently.
"""
from __future__ import annotations

import shutil
from typing import Any, Iterable, Optional

from arena.config.args import GRID_README, unknown_key_message
from arena.config.load import OPEN_NAMESPACES, valid_keys
from arena.config.verb_grammar import parse_overrides


def check_run_overrides(run: list[str], arms: list[dict[str, Any]], sources: list[str], grid: str,
                        sweep_keys: Iterable[str] = ()) -> None:
    """ValueError for `seed=N` (each cell's seed comes from seeds=), for a key that an arm of
    the grid sets (`po.method=gspo` on a grid of methods: the arm's value would win), and for an
    unknown key, naming the close matches among the sweep's keys and the run config's."""
    for arg, override in zip(run, parse_overrides(run)):
        key = override.key_or_group
        if key not in valid_keys() and not key.startswith((*OPEN_NAMESPACES, "hydra", "launcher.")):
            raise ValueError(unknown_key_message(key, [*sweep_keys, *valid_keys()]))
        if key == "seed":
            value = override.get_value_element_as_str()
            raise ValueError(f"{arg}: a sweep sets each cell's seed from seeds= (a count or a list); valid: "
                             f"seeds=[{value}] for that seed alone, or seeds=N for seeds 0..N-1")
        for i, arm in enumerate(arms):
            if key in arm and key != "name":
                where = sources[i] if i < len(sources) else f"grid {grid!r}"
                raise ValueError(f"{arg}: arm {arm['name']!r} of grid {grid!r} sets {key}={arm[key]} ({where}), and an "
                                 f"arm's keys are applied after the command line's, so {key}= here would do nothing; "
                                 f"valid: drop {key}=, or a grid of your own with grid=PATH ({GRID_README})")


def launcher_missing(kind: str) -> Optional[str]:
    """Why a launcher of `kind` cannot submit from this machine (slurm: no sbatch or srun on
    PATH), or None."""
    if kind == "slurm" and (shutil.which("sbatch") is None or shutil.which("srun") is None):
        return ("launcher kind 'slurm' needs SLURM's sbatch and srun on PATH, and this machine has none; valid: "
                "run the sweep from a SLURM login node, or launcher=local (--dry-run prints the plan anywhere)")
    return None
