"""Generated Sokoban rooms: seeding, validity, solvability and the expert on many seeds."""
import pytest

from arena.envs import make
from arena.envs.sokoban import SokobanEnv
from arena.envs.sokoban_gen import generate_room
from arena.envs.sokoban_solver import solve

SETTINGS = [
    dict(),  # default: dim 5, 1 box, depth 40, max_turns 15
    dict(dim=6),
    dict(dim=6, num_boxes=2),
    dict(dim=(6, 7), num_boxes=2, depth=60, max_turns=20),
]


def render_of(seed, **kwargs):
    return SokobanEnv(render_wall=True, **kwargs).reset(seed)[0]


def test_the_seed_alone_decides_the_room():
    first = [render_of(s) for s in range(20)]
    generate_room.cache_clear()  # regenerate from scratch: no help from the cache
    assert [render_of(s) for s in range(20)] == first
    assert first[0] != first[1]
    # distinct rooms among 20 seeds (5x5 rooms are small, so a few may coincide)
    assert len(set(first)) >= 15
    # the other settings also reproduce
    assert render_of(7, dim=6, num_boxes=2) == render_of(7, dim=6, num_boxes=2)


def test_registry_builds_sokoban():
    env = make("sokoban", dim=6)
    assert isinstance(env, SokobanEnv) and env.name == "sokoban" and env.max_turns == 15
    obs, info = env.reset(3)
    assert obs == SokobanEnv(dim=6).reset(3)[0]


@pytest.mark.parametrize("kwargs", SETTINGS)
def test_generated_rooms_are_valid_and_solvable_within_max_turns(kwargs):
    env = SokobanEnv(render_wall=True, **kwargs)
    rows, cols = env.rows, env.cols
    for seed in range(50):
        obs, info = env.reset(seed)
        lines = obs.split("\n")
        assert len(lines) == rows and all(len(line) == cols for line in lines)
        # the outer ring is wall
        assert lines[0] == "#" * cols and lines[-1] == "#" * cols
        assert all(line[0] == "#" and line[-1] == "#" for line in lines)
        # exactly one player, num_boxes boxes and as many targets, not solved yet
        cells = "".join(lines)
        assert cells.count("P") + cells.count("S") == 1
        assert cells.count("X") + cells.count("*") == env.num_boxes
        assert cells.count("O") + cells.count("*") + cells.count("S") == env.num_boxes
        assert info["won"] is False and cells.count("X") >= 1
        room = env._room
        plan = solve(room, room.player, room.boxes)
        assert plan is not None and 1 <= len(plan) <= env.max_turns
        # the generator's cached plan is also optimal
        assert len(generate_room(seed, rows, cols, env.num_boxes, env.depth, env.max_turns)[1]) == len(plan)


def test_render_wall_false_is_the_walled_render_without_its_outer_ring():
    for seed in range(10):
        walled = SokobanEnv(render_wall=True).reset(seed)[0].split("\n")
        bare = SokobanEnv(render_wall=False).reset(seed)[0]
        assert bare == "\n".join(line[1:-1] for line in walled[1:-1])
        assert len(bare.split("\n")) == 3  # dim 5 -> the 3x3 interior


def test_expert_wins_every_default_room_with_the_optimal_return():
    env = SokobanEnv()
    for seed in range(200):
        env.reset(seed)
        optimal = len(generate_room(seed, 5, 5, 1, 40, 15)[1])
        total, done, turns = 0.0, False, 0
        while not done:
            _, r, done, info = env.step(env.expert_action())
            total += r
            turns += 1
        # one box: it reaches the target only with the last push, so the return of an
        # optimal episode of L turns is L * (-0.1) + 1 + 10
        assert info["won"] and turns == optimal
        assert total == pytest.approx(-0.1 * optimal + 11.0, abs=1e-9)


@pytest.mark.parametrize("kwargs", SETTINGS[1:])
def test_expert_wins_other_settings(kwargs):
    env = SokobanEnv(**kwargs)
    wins = 0
    for seed in range(50):
        env.reset(seed)
        done = False
        while not done:
            _, _, done, info = env.step(env.expert_action())
        wins += info["won"]
    assert wins == 50


def test_eval_seeds_generate_too():
    env = SokobanEnv()
    obs, info = env.reset(1_000_000)
    assert obs != env.reset(0)[0] and not info["won"]


def test_impossible_settings_raise_value_error():
    # a 4x4 room has a 2x2 interior: a box can never leave a corner, so no room is solvable
    with pytest.raises(ValueError, match="no solvable Sokoban room"):
        SokobanEnv(dim=4, max_turns=15).reset(0)
