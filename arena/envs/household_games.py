"""Game pools for the household task: generation (offline) and loading.

(Over 400 lines, kept whole: generation writes each game's digests and verification regenerates
a bad game through the same generator and pool lock, so the two halves call each other; split
apart they would import each other. The one seam is the digest helpers at the bottom.)

A pool is a folder holding `manifest.json` and the games. The committed pool
(`arena/envs/games/household/`) stores every game's `.z8` story and `.json` state file in one
solid `games.tar.xz`: the compiled stories share the Inform 7 library, so one solid archive is
~10x smaller than the games compressed one by one. It is extracted once into a cache folder
named by the archive's hash. A generated pool (`pool="large"`) keeps its game files unpacked.

The manifest lists, for each game: `name` (file stem), `world_size` (rooms), `nb_objects`,
`quest_length`, `seed` (the textworld seed that made it), `split` (train | val | eval, fixed),
`walkthrough` (the commands that win it) and, in a generated pool, `sha256` ({".z8": hex,
".json": hex}: its files' digests). An extracted archive records its files' digests in
`digests.json` (computed from the archive's bytes at extraction).

A game's files are checked against those digests the first time a process plays it
(`verified_game`; once per game per process): a swapped, truncated or corrupted game (or a
generated game without a digest, from an older pool) is never played: it is made again (a
generated game regenerated from its entry, an archived one extracted again) and checked again.

The large pool's splits (`large_pool_specs`, docs/testbed.md "The large pool"): game i of a pool
with first seed s is made from seed s + i whatever the pool's size, so a small pool is the
prefix of a bigger one. Games 0-511 keep the first large pool's splits (whole 16-game size grids
alternating train / eval: 256 + 256), games 512-767 are the validation split (256 games, what
BC's band checks), games 768 and up are more training games. A new pool copies (hard-links)
every game that a sibling pool folder with the same first seed already made, after checking
that its spec equals the new one (`reusable_games`), and generates only the rest.
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

from arena.io.atomic import atomic_write_json, atomic_write_text, atomic_write_with

COMMITTED_POOL_DIR = Path(__file__).parent / "games" / "household"
ARCHIVE_NAME = "games.tar.xz"
MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "val", "eval")
# The large pool: games [0, 512) as first made (train/eval blocks of 16), [512, 768) validation,
# [768, n) training; its valid sizes are multiples of 256 (whole grids) from 768 to 4096.
LARGE_BLOCK, LARGE_FIRST_VAL, LARGE_FIRST_EXTRA_TRAIN = 16, 512, 768
LARGE_SIZES = tuple(range(768, 4096 + 1, 256))
# More held-out games for a tighter eval (env.kwargs.n_eval > 256): extra eval game j is made from
# seed first_seed + EXTRA_EVAL_SEED_OFFSET + j on the same size grid. The offset is above every
# training game's seed and its retry ladder (first_seed + 4095 + 19 * RETRY_SEED_STEP), so an
# extra eval game is never a training game of any large pool, whatever its n_large.
EVAL_SIZES = tuple(range(256, 2048 + 1, 256))
LARGE_EVAL_GAMES = EVAL_SIZES[0]  # the eval split of large_pool_specs; more are extra games
EXTRA_EVAL_SEED_OFFSET = 1_000_000
ENTRY_SUFFIX = ".entry.json"  # a generated game's manifest entry, written when the game is done
DIGESTS_NAME = "digests.json"  # an extracted archive's {file name: sha256}, written before the folder is complete
GAME_FILE_SUFFIXES = (".z8", ".json")  # a game's story file and its textworld state file
RETRY_SEED_STEP = 10_000  # generate_game tries seed, seed + 10_000, ... until a quest exists


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


def large_pool_specs(n_games: int, *, first_seed: int = 1001) -> list[dict]:
    """The large pool: pool_specs' grid and seeds, with game i's split

        eval  if i < 512 and (i // 16) is odd      (256 games)
        train if i < 512 and (i // 16) is even     (256 games)
        val   if 512 <= i < 768                    (256 games: 16 whole size grids)
        train if i >= 768                          (n - 768 games)

    so the first 512 games are exactly the 512-game pool of earlier sessions (eval_every 2,
    blocks of 16) and every split holds whole 16-game grids (all 4 x 4 sizes equally often).
    """
    if n_games not in LARGE_SIZES:
        raise ValueError(f"the large household pool has n_large in {', '.join(map(str, LARGE_SIZES))} "
                         f"(multiples of 256 from 768); got {n_games!r}")
    specs = pool_specs(n_games, first_seed=first_seed, eval_every=2, split_block=LARGE_BLOCK)
    for i in range(LARGE_FIRST_VAL, n_games):
        specs[i]["split"] = "val" if i < LARGE_FIRST_EXTRA_TRAIN else "train"
    return specs


def extra_eval_specs(n_eval: int, *, first_seed: int = 1001) -> list[dict]:
    """The eval games past the large pool's first 256 (n_eval - 256 of them): extra game j has
    the grid's size (rooms 2 + j % 4, quest length 1 + (j // 4) % 4), seed
    first_seed + EXTRA_EVAL_SEED_OFFSET + j and the name `x<j>_w<rooms>_q<quest>`."""
    if n_eval not in EVAL_SIZES:
        raise ValueError(f"the large household pool has n_eval in {', '.join(map(str, EVAL_SIZES))} "
                         f"(multiples of 256 up to 2048); got {n_eval!r}")
    specs = pool_specs(n_eval - LARGE_EVAL_GAMES, first_seed=first_seed + EXTRA_EVAL_SEED_OFFSET, eval_every=2)
    for j, spec in enumerate(specs):
        spec.update(name=f"x{j:03d}_w{spec['world_size']}_q{spec['quest_length']}", split="eval")
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

    Quest generation can fail for a seed; the next seeds (seed + RETRY_SEED_STEP * k) are tried, and the
    seed that worked is recorded, so the entry alone reproduces the game.
    """
    import textworld
    from textworld.generator import QuestGenerationError

    out_dir.mkdir(parents=True, exist_ok=True)
    for k in range(max_tries):
        seed = spec["seed"] + RETRY_SEED_STEP * k
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


def same_game(entry: dict, spec: dict) -> bool:
    """Whether a finished game's entry is what generate_game(spec) would make.

    Generation is a function of (rooms, objects, quest length, seed); a spec's seed may have been
    moved on by failed quests, to spec seed + RETRY_SEED_STEP * k with k >= 0, so the entry's seed
    must be one of those (the same failures happen again for the same spec)."""
    shift = int(entry["seed"]) - int(spec["seed"])
    return (all(entry[key] == spec[key] for key in ("name", "world_size", "nb_objects", "quest_length"))
            and shift >= 0 and shift % RETRY_SEED_STEP == 0)


def reusable_games(pools_root: Path, skip: Path) -> dict[str, list[Path]]:
    """name -> the folders under pools_root (other than `skip`) holding that game finished:
    its entry, story and state files all there (the entry is written last)."""
    found: dict[str, list[Path]] = {}
    if not Path(pools_root).is_dir():
        return found
    for folder in sorted(Path(pools_root).iterdir()):
        if not folder.is_dir() or folder.resolve() == Path(skip).resolve():
            continue
        for entry_path in sorted(folder.glob("*" + ENTRY_SUFFIX)):
            name = entry_path.name[: -len(ENTRY_SUFFIX)]
            if all((folder / (name + ext)).is_file() for ext in GAME_FILE_SUFFIXES):
                found.setdefault(name, []).append(folder)
    return found


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link source to target (no second copy on disk), else copy it and rename into place."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(source, partial)
        os.replace(partial, target)


def reuse_game(games_dir: Path, spec: dict, donors: list[Path]) -> dict | None:
    """Copy the first donor's finished game whose entry equals `spec`, and whose files match the
    digests its entry records, into games_dir; return its entry with the new spec's split, or
    None when no donor holds that game intact."""
    for folder in donors:
        entry = json.loads((folder / f"{spec['name']}{ENTRY_SUFFIX}").read_text())
        if not same_game(entry, spec) or game_problem(folder, spec["name"], entry.get("sha256")) is not None:
            continue  # another game, or files that are not (provably) the ones its entry describes
        for ext in GAME_FILE_SUFFIXES:
            _link_or_copy(folder / (spec["name"] + ext), games_dir / (spec["name"] + ext))
        return dict(spec, seed=entry["seed"], walkthrough=list(entry["walkthrough"]))
    return None


def generate_games(games_dir: Path, specs: list[dict], *, log: Callable[[str], None] = _log_stderr,
                   donors: dict[str, list[Path]] | None = None) -> list[dict]:
    """Make the games of `specs` in games_dir, one after the other, with progress and ETA.

    A game already finished in games_dir is kept; one that a donor folder holds (`donors`, from
    reusable_games) is copied after same_game checks its spec; the rest are generated. Each
    finished game leaves `<name>.entry.json` (its manifest entry, written atomically after its
    story files): an interrupted run resumes where it stopped and loses nothing.
        ETA = (seconds spent on the games generated by this call / their number) * games left
    """
    donors = donors or {}
    entries, made, reused, spent, start = [], 0, 0, 0.0, time.perf_counter()
    for k, spec in enumerate(specs, start=1):
        entry_path = games_dir / f"{spec['name']}{ENTRY_SUFFIX}"
        if entry_path.is_file() and (games_dir / f"{spec['name']}.z8").is_file():
            entries.append({"sha256": game_digests(games_dir, spec["name"]), **json.loads(entry_path.read_text())})
            continue
        entry = reuse_game(games_dir, spec, donors.get(spec["name"], []))
        if entry is not None:
            entry["sha256"] = game_digests(games_dir, spec["name"])
            atomic_write_json(entry_path, entry)
            entries.append(entry)
            reused += 1
            continue
        t0 = time.perf_counter()
        entry = generate_game(games_dir, spec)
        entry["sha256"] = game_digests(games_dir, spec["name"])
        atomic_write_json(entry_path, entry)
        entries.append(entry)
        made, spent = made + 1, spent + time.perf_counter() - t0
        left = sum(1 for later in specs[k:] if later["name"] not in donors)  # at most this many to generate
        eta = spent / made * left
        if made == 1 or k % 8 == 0 or k == len(specs):
            log(f"[household] generated game {k}/{len(specs)} ({spec['name']}), "
                f"{time.perf_counter() - start:.0f} s so far, ETA {eta / 60:.1f} min")
    if reused:
        log(f"[household] reused {reused} finished games from other pools with the same specs")
    return entries


def build_pool(pool_dir: Path, specs: list[dict], *, archive: bool,
               log: Callable[[str], None] = _log_stderr, reuse_from: Path | None = None) -> list[dict]:
    """Make every game of `specs` in pool_dir and write the manifest (written last); with
    `reuse_from`, finished games of the pool folders under it are copied instead of generated."""
    pool_dir = Path(pool_dir)
    pool_dir.mkdir(parents=True, exist_ok=True)
    donors = reusable_games(reuse_from, skip=pool_dir) if reuse_from is not None else {}
    with tempfile.TemporaryDirectory(dir=pool_dir) as tmp:
        games_dir = Path(tmp) if archive else pool_dir
        entries = generate_games(games_dir, specs, log=log, donors=donors)
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
    target = Path(cache_dir) / f"committed-{digest}-d"  # -d: with digests.json (older folders lack it)
    if (target / ".complete").is_file():
        return target
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".extract-"))
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(tmp, filter="data")
    atomic_write_json(tmp / DIGESTS_NAME, {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()})
    (tmp / ".complete").write_text("ok\n")
    try:
        os.rename(tmp, target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_pool(pool_dir: Path, specs: list[dict], *, log: Callable[[str], None] = _log_stderr) -> Path:
    """A generated (unarchived) pool in pool_dir, made on first use with progress and ETA: games
    that sibling pool folders already finished are copied (reusable_games), the rest generated
    (0.6-3 s a game on one core). A file lock lets one process make it while others wait, and an
    interrupted run resumes (generate_games)."""
    pool_dir = Path(pool_dir)
    if (pool_dir / MANIFEST_NAME).is_file():
        return pool_dir
    pool_dir.mkdir(parents=True, exist_ok=True)
    with open(pool_dir.parent / f"{pool_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (pool_dir / MANIFEST_NAME).is_file():
            log(f"[household] making {len(specs)} games in {pool_dir} (once; finished games of other "
                f"pools with the same first seed are copied, the rest generated at ~0.6-3 s a game on one core)")
            build_pool(pool_dir, specs, archive=False, log=log, reuse_from=pool_dir.parent)
    return pool_dir


def ensure_generated_pool(cache_dir: Path, *, n_games: int, first_seed: int, eval_every: int = 3,
                          split_block: int = 1, log: Callable[[str], None] = _log_stderr) -> Path:
    """The pool_specs pool (every `eval_every`-th block of `split_block` games is eval) under cache_dir."""
    suffix = "" if (eval_every, split_block) == (3, 1) else f"-e{eval_every}-b{split_block}"
    pool_dir = Path(cache_dir) / f"generated-n{n_games}-s{first_seed}{suffix}"
    specs = pool_specs(n_games, first_seed=first_seed, eval_every=eval_every, split_block=split_block)
    return ensure_pool(pool_dir, specs, log=log)


def large_pool_name(n_games: int, first_seed: int, n_eval: int = LARGE_EVAL_GAMES) -> str:
    """`large-n<n_games>-s<first_seed>`, plus `-e<n_eval>` when it holds extra eval games."""
    return f"large-n{n_games}-s{first_seed}" + ("" if n_eval == LARGE_EVAL_GAMES else f"-e{n_eval}")


def large_pool_layout(cache_dir: Path, *, n_games: int, first_seed: int,
                      n_eval: int = LARGE_EVAL_GAMES) -> tuple[Path, list[dict]]:
    """(folder, game specs) of the large pool under cache_dir: large_pool_specs' train / val /
    eval games, then extra_eval_specs' eval games. Nothing is read or written."""
    specs = large_pool_specs(n_games, first_seed=first_seed) + extra_eval_specs(n_eval, first_seed=first_seed)
    return Path(cache_dir) / large_pool_name(n_games, first_seed, n_eval), specs


def ensure_large_pool(cache_dir: Path, *, n_games: int, first_seed: int, n_eval: int = LARGE_EVAL_GAMES,
                      log: Callable[[str], None] = _log_stderr) -> Path:
    """The large pool (large_pool_layout) under cache_dir; finished games of sibling pools (the
    earlier 512-game pool, a large pool with fewer eval games) are copied, not generated."""
    pool_dir, specs = large_pool_layout(cache_dir, n_games=n_games, first_seed=first_seed, n_eval=n_eval)
    return ensure_pool(pool_dir, specs, log=log)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def game_digests(games_dir: Path, name: str) -> dict[str, str]:
    """{".z8": sha256, ".json": sha256} of one game's files (missing files are left out)."""
    return {ext: file_sha256(Path(games_dir) / (name + ext)) for ext in GAME_FILE_SUFFIXES
            if (Path(games_dir) / (name + ext)).is_file()}


def game_problem(games_dir: Path, name: str, recorded) -> str | None:
    """None when the game's files are there with the recorded digests, else why not."""
    if not isinstance(recorded, dict) or set(recorded) != set(GAME_FILE_SUFFIXES):
        return f"game {name} has no recorded sha256 (a pool made by an older arena)"
    now = game_digests(games_dir, name)
    for ext in GAME_FILE_SUFFIXES:
        if ext not in now:
            return f"{Path(games_dir) / (name + ext)} is missing"
        if now[ext] != recorded[ext]:
            return f"{Path(games_dir) / (name + ext)} differs from its recorded sha256 (swapped, truncated or corrupted)"
    return None


_VERIFIED: set[tuple[str, str]] = set()  # (games folder, game name) checked in this process


def verified_game(pool_dir: Path, games_dir: Path, manifest: dict, entry: dict,
                  log: Callable[[str], None] = _log_stderr) -> dict:
    """`entry` once its files match their digests (module docstring), the first time this
    process asks; a bad game is made again first (under the pool's lock) and `entry` updated
    in place. RuntimeError if it is still bad after that."""
    key = (str(Path(games_dir).resolve()), entry["name"])
    if key in _VERIFIED:
        return entry
    archived = bool(manifest.get("archive"))
    recorded = _archived_digests(games_dir, entry["name"]) if archived else entry.get("sha256")
    problem = game_problem(games_dir, entry["name"], recorded)
    if problem is not None:
        log(f"[household] {problem}: not played; making it again")
        with open(Path(games_dir).parent / f"{Path(games_dir).name}.lock", "a") as lock:  # ensure_pool's lock
            fcntl.flock(lock, fcntl.LOCK_EX)
            if archived:
                _extract_again(Path(pool_dir) / manifest["archive"], games_dir, entry["name"])
            else:
                entry.update(_regenerate(Path(pool_dir), entry))
        recorded = _archived_digests(games_dir, entry["name"]) if archived else entry.get("sha256")
        problem = game_problem(games_dir, entry["name"], recorded)
        if problem is not None:
            raise RuntimeError(f"household game {entry['name']} is still bad after it was made again: {problem}")
    _VERIFIED.add(key)
    return entry


def _archived_digests(games_dir: Path, name: str) -> dict | None:
    try:
        digests = json.loads((Path(games_dir) / DIGESTS_NAME).read_text())
    except (OSError, ValueError):
        return None
    found = {ext: digests.get(name + ext) for ext in GAME_FILE_SUFFIXES}
    return found if all(found.values()) else None


def _extract_again(archive: Path, games_dir: Path, name: str) -> None:
    """The game's members of `archive`, written over its extracted files (each atomically)."""
    with tarfile.open(archive, "r:xz") as tar:
        for ext in GAME_FILE_SUFFIXES:
            data = tar.extractfile(name + ext).read()
            atomic_write_with(Path(games_dir) / (name + ext), lambda tmp: Path(tmp).write_bytes(data))


def _regenerate(pool_dir: Path, entry: dict) -> dict:
    """Generate one game of a generated pool again from its entry (its seed is the one that
    worked) and record its new digests in its entry file and the manifest (atomically)."""
    spec = {k: entry[k] for k in ("name", "world_size", "nb_objects", "quest_length", "seed", "split")}
    for ext in GAME_FILE_SUFFIXES:
        (pool_dir / (entry["name"] + ext)).unlink(missing_ok=True)
    fresh = generate_game(pool_dir, spec)
    fresh["sha256"] = game_digests(pool_dir, entry["name"])
    atomic_write_json(pool_dir / f"{entry['name']}{ENTRY_SUFFIX}", fresh)
    manifest = json.loads((pool_dir / MANIFEST_NAME).read_text())
    manifest["games"] = [fresh if g["name"] == entry["name"] else g for g in manifest["games"]]
    atomic_write_text(pool_dir / MANIFEST_NAME, json.dumps(manifest, indent=1) + "\n")
    return fresh
