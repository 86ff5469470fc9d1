"""Game pools for the household task: generation (offline) and loading.

A pool is a folder holding `manifest.json` and the games. The committed pool
(`arena/envs/games/household/`) stores every game's `.z8` story and `.json` state file in one
solid `games.tar.xz`: the compiled stories share the Inform 7 library, so one solid archive is
~10x smaller than the games compressed one by one. It is extracted once into a cache folder
named by the archive's hash. A generated pool (`pool="large"`) keeps its game files unpacked.

The manifest lists, for each game: `name` (file stem), `world_size` (rooms), `nb_objects`,
`quest_length`, `seed` (the textworld seed that made it), `split` (train | eval, fixed) and
`walkthrough` (the commands that win it).
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

from arena.runs.atomic import atomic_write_json, atomic_write_text

COMMITTED_POOL_DIR = Path(__file__).parent / "games" / "household"
ARCHIVE_NAME = "games.tar.xz"
MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "eval")
ENTRY_SUFFIX = ".entry.json"  # a generated game's manifest entry, written when the game is done


def default_cache_dir() -> Path:
    """Where extracted and generated pools live: $ARENA_CACHE or ~/.cache/arena, then /household."""
    root = os.environ.get("ARENA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "arena")
    return Path(root) / "household"


def pool_specs(n_games: int, *, first_seed: int = 1, eval_every: int = 3, split_block: int = 1) -> list[dict]:
    """The generation grid: game i has 2 + i%4 rooms and quest length 1 + (i//4)%4.

    Games are split in blocks of `split_block` consecutive games: game i is an evaluation game
    iff (i // split_block) % eval_every == eval_every - 1. The committed pool uses blocks of 1
    and eval_every 3 (every third game: 20 train and 10 eval games of 30, both splits covering
    all sizes). With eval_every 2, blocks of 1 would put only odd room counts in the eval split;
    blocks of 16 (one whole grid) alternate whole grids, so both splits again cover all sizes.
    """
    if eval_every < 2 or split_block < 1:
        raise ValueError(f"need eval_every >= 2 and split_block >= 1, got {eval_every}, {split_block}")
    specs = []
    for i in range(n_games):
        world_size = 2 + i % 4
        quest_length = 1 + (i // 4) % 4
        specs.append(dict(
            name=f"g{i:03d}_w{world_size}_q{quest_length}",
            world_size=world_size,
            nb_objects=2 * world_size + 2,
            quest_length=quest_length,
            seed=first_seed + i,
            split="eval" if (i // split_block) % eval_every == eval_every - 1 else "train",
        ))
    return specs


def make_pick_and_place_game(options):
    """textworld's `make_game`, with the quest's last action restricted to put/insert.

    So every quest ends by placing an object on a supporter or into a container, like ALFWorld's
    pick_and_place tasks; the earlier actions (go, open, unlock, take, ...) are free.
    """
    from textworld.generator import Game, make_grammar, make_quest, make_world

    world = make_world(options.nb_rooms, nb_objects=0, rngs=options.rngs)
    options.chaining.rules_per_depth = [options.kb.rules.get_matching("put", "insert")]
    options.chaining.backward = True
    options.chaining.create_variables = True
    options.chaining.rng = options.rngs["quest"]
    options.chaining.restricted_types = {"r", "d"}
    quests = make_quest(world, options)
    # Distractor objects up to nb_objects, as in textworld's make_game.
    nb_objects = sum(1 for e in world.entities if e.type not in {"r", "d", "I", "P"})
    if options.nb_objects > nb_objects:
        world.populate(options.nb_objects - nb_objects, rng=options.rngs["objects"])
    game = Game(world, make_grammar(options.grammar, rng=options.rngs["grammar"]), quests)
    game.metadata["uuid"] = options.uuid
    return game


def generate_game(out_dir: Path, spec: dict, *, max_tries: int = 20) -> dict:
    """Make and compile one game (`<name>.z8` + `<name>.json`) into out_dir; return its manifest entry.

    Quest generation can fail for a seed; the next seeds (seed + 10_000 * k) are tried, and the
    seed that worked is recorded, so the entry alone reproduces the game.
    """
    import textworld
    from textworld.generator import QuestGenerationError

    out_dir.mkdir(parents=True, exist_ok=True)
    for k in range(max_tries):
        seed = spec["seed"] + 10_000 * k
        options = textworld.GameOptions()
        options.seeds = seed
        options.nb_rooms = spec["world_size"]
        options.nb_objects = spec["nb_objects"]
        options.chaining.min_length = options.chaining.max_length = spec["quest_length"]
        options.chaining.max_depth = spec["quest_length"]
        options.chaining.min_breadth = options.chaining.max_breadth = 1
        options.grammar.theme = "house"
        options.path = str(out_dir / (spec["name"] + ".z8"))
        options.file_ext = ".z8"
        options.force_recompile = True
        try:
            game = make_pick_and_place_game(options)
        except QuestGenerationError:
            continue
        textworld.generator.compile_game(game, options)
        return dict(spec, seed=seed, walkthrough=list(game.walkthrough))
    raise RuntimeError(f"no quest could be generated for {spec} in {max_tries} seeds")


def _add_file(tar: tarfile.TarFile, path: Path) -> None:
    # Fixed metadata so that the same games always give the same archive bytes.
    data = path.read_bytes()
    info = tarfile.TarInfo(path.name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def _log_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def generate_games(games_dir: Path, specs: list[dict], *, log: Callable[[str], None] = _log_stderr) -> list[dict]:
    """Generate the games of `specs` into games_dir, one after the other, with progress and ETA.

    Each finished game leaves `<name>.entry.json` (its manifest entry, written atomically after
    its story file): an interrupted generation resumes where it stopped and loses nothing.
        ETA = (seconds spent on the games made by this call / their number) * games left
    """
    entries, made, spent, start = [], 0, 0.0, time.perf_counter()
    for k, spec in enumerate(specs, start=1):
        entry_path = games_dir / f"{spec['name']}{ENTRY_SUFFIX}"
        if entry_path.is_file() and (games_dir / f"{spec['name']}.z8").is_file():
            entries.append(json.loads(entry_path.read_text()))
            continue
        t0 = time.perf_counter()
        entry = generate_game(games_dir, spec)
        atomic_write_json(entry_path, entry)
        entries.append(entry)
        made, spent = made + 1, spent + time.perf_counter() - t0
        eta = spent / made * (len(specs) - k)
        if made == 1 or k % 8 == 0 or k == len(specs):
            log(f"[household] generated game {k}/{len(specs)} ({spec['name']}), "
                f"{time.perf_counter() - start:.0f} s so far, ETA {eta / 60:.1f} min")
    return entries


def build_pool(pool_dir: Path, specs: list[dict], *, archive: bool,
               log: Callable[[str], None] = _log_stderr) -> list[dict]:
    """Generate every game of `specs` into pool_dir and write the manifest (written last)."""
    pool_dir = Path(pool_dir)
    pool_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pool_dir) as tmp:
        games_dir = Path(tmp) if archive else pool_dir
        entries = generate_games(games_dir, specs, log=log)
        if archive:
            with tarfile.open(pool_dir / ARCHIVE_NAME, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
                for entry in entries:
                    for ext in (".z8", ".json"):
                        _add_file(tar, games_dir / (entry["name"] + ext))
        else:
            for leftover in pool_dir.glob("*.ni"):
                leftover.unlink()
    manifest = dict(archive=ARCHIVE_NAME if archive else None, games=entries)
    atomic_write_text(pool_dir / MANIFEST_NAME, json.dumps(manifest, indent=1) + "\n")
    return entries


def read_manifest(pool_dir: Path) -> dict:
    path = Path(pool_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no household pool manifest at {path}")
    manifest = json.loads(path.read_text())
    bad = [g["name"] for g in manifest["games"] if g["split"] not in SPLITS]
    if bad:
        raise ValueError(f"games {bad} have a split outside {SPLITS}")
    return manifest


def games_folder(pool_dir: Path, manifest: dict, cache_dir: Path) -> Path:
    """The folder holding the pool's `.z8`/`.json` files, extracting the archive once if needed.

    Extraction goes to a temporary folder that is then renamed, so concurrent processes never see
    a half-written pool.
    """
    if not manifest.get("archive"):
        return Path(pool_dir)
    archive = Path(pool_dir) / manifest["archive"]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    target = Path(cache_dir) / f"committed-{digest}"
    if (target / ".complete").is_file():
        return target
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".extract-"))
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(tmp, filter="data")
    (tmp / ".complete").write_text("ok\n")
    try:
        os.rename(tmp, target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_generated_pool(cache_dir: Path, *, n_games: int, first_seed: int, eval_every: int = 3,
                          split_block: int = 1, log: Callable[[str], None] = _log_stderr) -> Path:
    """A generated (unarchived) pool under cache_dir, made on first use (minutes: 1.5-3 s per
    game on one core), with progress and ETA; a file lock lets one process generate while
    others wait, and an interrupted generation resumes (generate_games)."""
    suffix = "" if (eval_every, split_block) == (3, 1) else f"-e{eval_every}-b{split_block}"
    pool_dir = Path(cache_dir) / f"generated-n{n_games}-s{first_seed}{suffix}"
    if (pool_dir / MANIFEST_NAME).is_file():
        return pool_dir
    pool_dir.mkdir(parents=True, exist_ok=True)
    with open(pool_dir.parent / f"{pool_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (pool_dir / MANIFEST_NAME).is_file():
            log(f"[household] generating {n_games} games into {pool_dir} (once; ~1.5-3 s a game on one core)")
            specs = pool_specs(n_games, first_seed=first_seed, eval_every=eval_every, split_block=split_block)
            build_pool(pool_dir, specs, archive=False, log=log)
    return pool_dir
