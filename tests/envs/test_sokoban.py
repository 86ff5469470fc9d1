"""Sokoban on hand-written rooms: rewards, moves, actions, cut-off, rendering and the solver.

Legend: '#' wall, '_' floor, 'O' target, 'X' box, '*' box on target, 'P' player, 'S' player on
target. Rewards (gym-sokoban): -0.1 per turn, +1 when the number of boxes on targets rises,
-1 when it falls, +10 when every box is on a target.
"""
import pytest

from arena.envs.sokoban import SokobanEnv
from arena.envs.sokoban_room import parse_layout
from arena.envs.sokoban_solver import live_cells, solve

EXACT = 1e-12  # float sums such as -0.1 + 1 + 10 are compared to their decimal value

CORRIDOR = ["######", "#PX_O#", "######"]
TWO_BOXES = ["######", "#PXO_#", "#_X_O#", "######"]
BOX_OFF = ["#######", "#P*_XO#", "#######"]
OPEN = ["######", "#____#", "#PX_O#", "######"]


def make(layout, **kwargs):
    kwargs.setdefault("render_wall", True)
    return SokobanEnv.from_layout(layout, **kwargs)


def test_push_onto_target_solves_the_corridor():
    env = make(CORRIDOR)
    obs, info = env.reset(0)
    assert obs == "\n".join(CORRIDOR)
    assert info["won"] is False and info["boxes_on_target"] == 0
    assert info["admissible_actions"] == ["up", "down", "left", "right"]
    # right: box 2 -> 3 (floor), count 0 -> 0, reward = -0.1
    obs, r, done, info = env.step("right")
    assert obs == "######\n#_PXO#\n######"
    assert r == pytest.approx(-0.1, abs=EXACT) and not done and info["action_is_effective"]
    # right: box 3 -> 4 (the only target), count 0 -> 1 = all: -0.1 + 1 + 10 = 10.9, won
    obs, r, done, info = env.step("right")
    assert obs == "######\n#__P*#\n######"
    assert r == pytest.approx(10.9, abs=EXACT)
    assert done and info["won"] and info["boxes_on_target"] == 1 and info["turn"] == 2


def test_walls_block_moves_and_boxes():
    env = make(TWO_BOXES)
    start, _ = env.reset(0)
    # up from (1,1) is a wall: nothing moves, the turn still costs -0.1
    obs, r, done, info = env.step("up")
    assert obs == start and r == pytest.approx(-0.1, abs=EXACT) and not info["action_is_effective"]
    # right pushes the upper box onto its target: 0 -> 1 of 2 boxes, -0.1 + 1 = 0.9, not won
    obs, r, done, info = env.step("right")
    assert obs == "######\n#_P*_#\n#_X_O#\n######"
    assert r == pytest.approx(0.9, abs=EXACT) and not done and info["boxes_on_target"] == 1
    # down would push the lower box into the bottom wall: blocked, -0.1
    obs, r, done, info = env.step("down")
    assert obs == "######\n#_P*_#\n#_X_O#\n######" and r == pytest.approx(-0.1, abs=EXACT)
    # left, down (walks), right (box 2 -> 3, floor): -0.1 each; right (box onto O): +10.9
    rewards = [env.step(a)[1] for a in ("left", "down", "right")]
    assert rewards == pytest.approx([-0.1] * 3, abs=EXACT)
    obs, r, done, info = env.step("right")
    assert obs == "######\n#__*_#\n#__P*#\n######"
    assert r == pytest.approx(10.9, abs=EXACT) and done and info["won"] and info["turn"] == 7


def test_push_off_target_and_box_into_box():
    env = make(BOX_OFF)
    env.reset(0)
    # right pushes the box off its target: count 1 -> 0, -0.1 - 1 = -1.1
    obs, r, done, info = env.step("right")
    assert obs == "#######\n#_SXXO#\n#######"
    assert r == pytest.approx(-1.1, abs=EXACT) and info["boxes_on_target"] == 0
    # right again would push the box into the other box: blocked, -0.1, player stays on 'S'
    obs2, r, done, info = env.step("right")
    assert obs2 == obs and r == pytest.approx(-0.1, abs=EXACT) and not info["action_is_effective"]


@pytest.mark.parametrize("text", ["jump", "", "up left", "upp", "<action>up</action>", "1"])
def test_non_action_text_is_a_paid_no_op(text):
    env = make(OPEN)
    start, _ = env.reset(0)
    assert not env.is_admissible(text)
    obs, r, done, info = env.step(text)
    assert obs == start and r == pytest.approx(-0.1, abs=EXACT) and not done
    assert info["turn"] == 1 and not info["action_is_effective"]


def test_actions_are_case_and_space_insensitive():
    env = make(OPEN)
    env.reset(0)
    assert env.is_admissible("  UP \n") and env.is_admissible("Left")
    obs, _, _, info = env.step("  UP \n")
    assert obs == "######\n#P___#\n#_X_O#\n######" and info["action_is_effective"]


def test_max_turns_cuts_the_episode():
    env = make(OPEN, max_turns=3)
    env.reset(0)
    results = [env.step("left") for _ in range(3)]  # left of (2,1) is a wall: three no-ops
    assert [done for _, _, done, _ in results] == [False, False, True]
    assert [r for _, r, _, _ in results] == pytest.approx([-0.1] * 3, abs=EXACT)
    assert results[-1][3]["won"] is False
    assert env.expert_action() is None
    with pytest.raises(RuntimeError):
        env.step("right")
    # reset restores the hand-written room and a fresh turn budget
    obs, info = env.reset(0)
    assert obs == "\n".join(OPEN) and info["turn"] == 0


def test_render_without_wall_drops_the_outer_ring():
    env = make(TWO_BOXES, render_wall=False)
    obs, _ = env.reset(0)
    # rows 1..2 and cols 1..4 of the layout
    assert obs == "PXO_\n_X_O"
    assert "not drawn" in env.instruction
    assert "not drawn" not in make(TWO_BOXES).instruction


def test_instruction_documents_the_legend_and_actions():
    text = SokobanEnv().instruction
    for symbol in ("'#'", "'_'", "'O'", "'X'", "'*'", "'P'", "'S'"):
        assert symbol in text
    for word in ("up", "down", "left", "right"):
        assert word in text
    assert text.isascii()


def test_solver_finds_the_unique_shortest_plan():
    # TWO_BOXES: pushing the upper box first costs right + (left, down) + right, right = 5;
    # the other order costs down, right, right + 3 moves back to (1,1) + right = 7.
    room = parse_layout(TWO_BOXES)
    assert solve(room, room.player, room.boxes) == ["right", "left", "down", "right", "right"]
    assert solve(room, room.player, room.boxes, max_depth=4) is None
    assert solve(room, room.player, room.boxes, max_depth=5) == ["right", "left", "down", "right", "right"]


def test_expert_follows_and_replans():
    env = make(TWO_BOXES)
    env.reset(0)
    total, done = 0.0, False
    while not done:
        _, r, done, info = env.step(env.expert_action())
        total += r
    # 0.9 (first box on target) + 3 * -0.1 + 10.9 (second box, solved) = 11.5
    assert info["won"] and info["turn"] == 5 and total == pytest.approx(11.5, abs=EXACT)

    env = make(OPEN)
    env.reset(0)
    assert env.expert_action() == "right"
    env.step("up")  # stray to (1,1): the only shortest plan is now down, right, right
    assert env.expert_action() == "down"


def test_dead_box_has_no_expert_move():
    room = parse_layout(["#####", "#XPO#", "#####"])  # the box sits in a corner
    assert room.boxes.isdisjoint(live_cells(room))
    assert solve(room, room.player, room.boxes) is None
    env = make(["#####", "#XPO#", "#####"])
    assert env.expert_action() is None


def test_bad_layouts_and_settings_raise_value_error():
    with pytest.raises(ValueError, match="valid: #"):
        parse_layout(["#####", "#P?O#", "#####"])
    with pytest.raises(ValueError, match="one player"):
        parse_layout(["#####", "#_XO#", "#####"])
    with pytest.raises(ValueError, match="targets"):
        parse_layout(["#####", "#PXX#", "#O__#"])
    with pytest.raises(ValueError, match="dim"):
        SokobanEnv(dim=3)
    with pytest.raises(ValueError, match=">= 1"):
        SokobanEnv(num_boxes=0)
