"""Generate a household game pool offline.

    python scripts/make_household_games.py                    # the committed pool (30 games)
    python scripts/make_household_games.py --n-games 200 --out /tmp/pool --no-archive

The committed pool lives in arena/envs/games/household/ (manifest.json + games.tar.xz). Games
are seeded: the same arguments give the same games (walkthroughs, rooms, objects).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from arena.envs.household_games import COMMITTED_POOL_DIR, build_pool, pool_specs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=COMMITTED_POOL_DIR)
    parser.add_argument("--n-games", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--no-archive", action="store_true", help="keep the game files unpacked")
    args = parser.parse_args()

    start = time.time()
    specs = pool_specs(args.n_games, first_seed=args.first_seed)
    entries = build_pool(args.out, specs, archive=not args.no_archive)
    for entry in entries:
        print(f"{entry['name']:>16} {entry['split']:>5} seed={entry['seed']:<6} {entry['walkthrough']}")
    n_eval = sum(e["split"] == "eval" for e in entries)
    print(f"{len(entries)} games ({len(entries) - n_eval} train, {n_eval} eval) in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
