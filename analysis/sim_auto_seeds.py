"""seeds=auto's error rate and power, simulated (the table in docs/design.md, Sweep: seeds=auto):

    python analysis/sim_auto_seeds.py [sweeps=20000] [sd=8]

is_clipping's confirmatory families (F1: CISPO - GRPO, SAPO - GRPO; F2: CISPO_SM - CISPO, SAPO_SM -
SAPO; GSPO: GSPO - GRPO) through the whole procedure (arena/sweeps/auto_sim.py), at max_seeds 4, 6
and 10, under today's group-sequential bound and under the Bonferroni split it replaced (each look
at 0.05 / looks). No effect: the share of sweeps with a false better/worse per family. Effect: CISPO
and SAPO d_z x sd points below the other arms (F1 and F2 true, GSPO null); power = the share of
sweeps where a true member resolves in its direction; cells = mean runs per sweep (6 arms).
"""
from __future__ import annotations

import sys

import numpy as np

from arena.analysis.sequential import SpendingBound
from arena.sweeps.auto_sim import CLIPPING, simulate

SIGN = [-1, -1, 1, 1, 1]


def row(max_seeds: int, sd: float, sweeps: int, dz: float, bound: bool) -> str:
    mu = [0.0, 0.0, -dz * sd, -dz * sd, 0.0, 0.0]
    kw = {"bound": SpendingBound(3, max_seeds)} if bound else {"alpha": 0.05 / (max_seeds - 2)}
    out = simulate(mu, sd=sd, max_seeds=max_seeds, n_sweeps=sweeps, seed=max_seeds, **kw)
    name = "bound" if bound else "0.05/looks"
    cells = out.counts.sum(axis=1).mean()
    if dz == 0:
        err = out.family_error([True] * len(CLIPPING))
        return f"| {max_seeds} | {name} | none | " + " | ".join(f"{100 * err[f]:.1f}%" for f in ("F1", "F2", "GSPO")) \
            + f" | - | {cells:.1f} |"
    power = out.power(SIGN)
    err = out.family_error([False, False, False, False, True])["GSPO"]
    return (f"| {max_seeds} | {name} | d_z {dz:g} | {100 * power[:2].mean():.0f}% | {100 * power[2:4].mean():.0f}% | "
            f"{100 * err:.1f}% (false) | - | {cells:.1f} |")


def main(argv: list[str]) -> None:
    opts = dict(a.split("=", 1) for a in argv)
    sweeps, sd = int(opts.get("sweeps", 20000)), float(opts.get("sd", 8.0))
    print(f"{sweeps} simulated sweeps per row; paired sd {sd:g} points; min_effect 5")
    print("| max_seeds | verdicts at | effect | F1 | F2 | GSPO | | cells |")
    print("|---|---|---|---|---|---|---|---|")
    for max_seeds in (4, 6, 10):
        for dz in (0.0, 1.1, 2.0):
            for bound in (True, False):
                print(row(max_seeds, sd, sweeps, dz, bound), flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main(sys.argv[1:])
