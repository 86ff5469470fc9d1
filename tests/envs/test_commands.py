"""`arena envs check|play` command functions, driven with sokoban."""
import pytest

from arena.envs import commands
from arena.envs.sokoban import SokobanEnv
from arena.envs.sokoban_gen import generate_room


def expert_moves(seed, **kwargs):
    env = SokobanEnv(**kwargs)
    env.reset(seed)
    moves, done = [], False
    while not done:
        moves.append(env.expert_action())
        done = env.step(moves[-1])[2]
    return moves


def test_check_reports_expert_success_on_training_seeds():
    printed = []
    result = commands.check("sokoban", n=20, print_fn=printed.append)
    assert result["success_rate"] == 1.0 and result["n"] == 20
    # the expert plays the generator's optimal plans, so the mean number of turns is their mean
    # length, and each 1-box episode of L turns returns -0.1 L + 11
    lengths = [len(generate_room(seed, 5, 5, 1, 40, 15)[1]) for seed in range(20)]
    assert result["mean_turns"] == pytest.approx(sum(lengths) / 20, abs=1e-12)
    assert result["mean_return"] == pytest.approx(sum(11 - 0.1 * L for L in lengths) / 20, abs=1e-9)
    assert result["steps_per_second"] > 0
    assert len(printed) == 1 and "success 1.000 over 20 seeds" in printed[0]


def test_check_passes_env_kwargs():
    result = commands.check("sokoban", n=5, print_fn=lambda *_: None, dim=6, num_boxes=2)
    lengths = [len(generate_room(seed, 6, 6, 2, 40, 15)[1]) for seed in range(5)]
    assert result["success_rate"] == 1.0
    assert result["mean_turns"] == pytest.approx(sum(lengths) / 5, abs=1e-12)


def test_check_rejects_bad_input():
    with pytest.raises(ValueError, match="valid: .*sokoban"):
        commands.check("no_such_env", n=2)
    with pytest.raises(ValueError, match="n >= 1"):
        commands.check("sokoban", n=0)


def test_play_with_the_experts_moves_wins():
    moves = expert_moves(4)
    lines = iter(moves)
    printed = []
    code = commands.play("sokoban", 4, input_fn=lambda prompt: next(lines), print_fn=printed.append)
    assert code == 0
    assert printed[-1].endswith(f"won after {len(moves)} turns, return {11 - 0.1 * len(moves):+.2f}")
    assert any("admissible actions: up, down, left, right" in p for p in printed)


def test_play_quits_hints_and_flags_bad_actions():
    first = expert_moves(2)[0]
    lines = iter(["?", "dance", "q"])
    printed = []
    code = commands.play("sokoban", 2, input_fn=lambda prompt: next(lines), print_fn=printed.append)
    assert code == 0
    assert f"expert: {first}" in printed
    assert any("'dance' is not an admissible action" in p for p in printed)
    assert any("reward -0.10" in p for p in printed)  # the no-op turn still costs -0.1
    assert printed[-1] == "quit after 1 turns, return -0.10"


def test_play_treats_end_of_input_as_quit():
    def closed(prompt):
        raise EOFError

    printed = []
    assert commands.play("sokoban", 0, input_fn=closed, print_fn=printed.append) == 0
    assert printed[-1] == "quit after 0 turns, return 0.00"
