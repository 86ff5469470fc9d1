"""Game pools for the household task: generation (offline) and loading (issue #3).

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

import hashlib
import lzma
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

COMMITTED_POOL_DIR = Path(__file__).parent / "games" / "household"
ARCHIVE_NAME = "games.tar.xz"
MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "eval")


def default_cache_dir() -> Path:
    """Where extracted and generated pools live: $ARENA_CACHE or ~/.cache/arena, then /household."""
    root = os.environ.get("ARENA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "arena")
    return Path(root) / "household"


def pool_specs(n_games: int, *, first_seed: int = 1, eval_every: int = 3) -> list[dict]:
    """The generation grid: game i has 2 + i%4 rooms and quest length 1 + (i//4)%4.

    Every `eval_every`-th game (i % eval_every == eval_every - 1) is an evaluation game, so both
    splits cover all the sizes; for 30 games that gives 20 train and 10 eval games.
    """
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
            split="eval" if i % eval_every == eval_every - 1 else "train",
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


def build_pool(pool_dir: Path, specs: list[dict], *, archive: bool) -> list[dict]:
    """Generate every game of `specs` into pool_dir and write the manifest (written last)."""
    pool_dir = Path(pool_dir)
    pool_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pool_dir) as tmp:
        games_dir = Path(tmp) if archive else pool_dir
        entries = [generate_game(games_dir, spec) for spec in specs]
        if archive:
            with tarfile.open(pool_dir / ARCHIVE_NAME, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
                for entry in entries:
                    for ext in (".z8", ".json"):
                        _add_file(tar, games_dir / (entry["name"] + ext))
        else:
            for leftover in pool_dir.glob("*.ni"):
                leftover.unlink()
    manifest = dict(archive=ARCHIVE_NAME if archive else None, games=entries)
    (pool_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
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


def ensure_generated_pool(cache_dir: Path, *, n_games: int, first_seed: int) -> Path:
    """A generated (unarchived) pool under cache_dir, made on first use (minutes: ~3 s per game)."""
    pool_dir = Path(cache_dir) / f"generated-n{n_games}-s{first_seed}"
    if not (pool_dir / MANIFEST_NAME).is_file():
        build_pool(pool_dir, pool_specs(n_games, first_seed=first_seed), archive=False)
    return pool_dir
