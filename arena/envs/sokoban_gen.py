"""Procedural Sokoban rooms by reverse play from the solved state (after gym-sokoban).

1. Topology: a random walk over the interior carves floor with small 3x3 masks; the outer ring
   of the room stays wall (gym-sokoban `room_topology_generation`, `num_steps = 1.7 (rows + cols)`).
2. Placement: `num_boxes` targets and the player on distinct random floor cells; every box
   starts on its target (the solved state).
3. Reverse play: for `depth` steps the player takes a random one of 8 reverse actions
   (4 directions x {pull, plain move}); a pull drags the box behind the player along. Every
   reverse step is the inverse of a legal forward step, so each visited state is solvable.
4. Pick: rank the visited unsolved states by gym-sokoban's score
   `box_swaps * sum_boxes |box - its target|_1` (box_swaps = how often the pulled box changed;
   0 while any box is still on a target); the BFS solver solves the best
   `CANDIDATES_PER_ROOM` of them within `max_turns` actions and the longest optimal plan wins
   (ties: the better score). If none is solvable in time, start over at step 1.

All randomness comes from `random.Random(seed)`, so the seed alone decides the room.
"""
from __future__ import annotations

import functools
import random

from .sokoban_room import Room, direction_offsets
from .sokoban_solver import live_cells, solve

# gym-sokoban's carving masks (each contains its centre, so the carved floor is connected)
MASKS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)
WALK_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
CANDIDATES_PER_ROOM = 8  # best-scored reverse-play states given to the solver per carving


def carve_floor(rng: random.Random, rows: int, cols: int, *, p_change_direction: float = 0.35) -> set:
    """Floor cells (r, c) of a random room whose outer ring is wall."""
    num_steps = int(1.7 * (rows + cols))
    direction = rng.choice(WALK_DIRECTIONS)
    r, c = rng.randint(1, rows - 2), rng.randint(1, cols - 2)
    floor = set()
    for _ in range(num_steps):
        if rng.random() < p_change_direction:
            direction = rng.choice(WALK_DIRECTIONS)
        r = min(max(r + direction[0], 1), rows - 2)
        c = min(max(c + direction[1], 1), cols - 2)
        mask = rng.choice(MASKS)
        for i in range(3):
            for j in range(3):
                if mask[i][j]:
                    floor.add((r - 1 + i, c - 1 + j))
    return {(i, j) for i, j in floor if 0 < i < rows - 1 and 0 < j < cols - 1}


def reverse_play(rng: random.Random, room: Room, depth: int) -> list:
    """Unsolved states visited by `depth` random reverse steps from the solved state, as
    (score, player, boxes), best score first (ties: first visited first)."""
    stride, walls, targets = room.stride, room.walls, room.targets
    deltas = list(direction_offsets(stride).values())
    origin = {t: t for t in targets}  # current box cell -> the target it started on
    player, swaps, last_pulled = room.player, 0, None
    seen = {}
    for _ in range(depth):
        action = rng.randrange(8)  # 0-3: move and pull, 4-7: plain move
        d = deltas[action % 4]
        ahead, behind = player + d, player - d
        if ahead in walls or ahead in origin:
            continue
        if action < 4 and behind in origin:
            box_target = origin.pop(behind)
            origin[player] = box_target
            if box_target != last_pulled:
                swaps += 1
                last_pulled = box_target
        player = ahead
        boxes = frozenset(origin)
        if boxes <= targets or (player, boxes) in seen:
            continue
        # displacement = sum over boxes of the Manhattan distance to the box's own target;
        # as gym-sokoban, a state with any box still on a target scores 0
        displacement = sum(
            abs(b // stride - t // stride) + abs(b % stride - t % stride) for b, t in origin.items()
        )
        seen[(player, boxes)] = 0 if boxes & targets else swaps * displacement
    ranked = sorted(seen.items(), key=lambda item: -item[1])  # stable: ties keep visit order
    return [(score, p, b) for (p, b), score in ranked]


@functools.lru_cache(maxsize=16384)
def generate_room(
    seed: int, rows: int, cols: int, num_boxes: int, depth: int, max_turns: int, max_attempts: int = 500
) -> tuple:
    """(room, optimal plan) for `seed`; the plan has 1..max_turns actions. Cached: the n
    rollouts of a group reset the same seed."""
    rng = random.Random(seed)
    stride = cols + 2
    for _ in range(max_attempts):
        floor = sorted(carve_floor(rng, rows, cols))
        if len(floor) < num_boxes + 2:  # the player, the boxes and room to move
            continue
        cells = rng.sample(floor, num_boxes + 1)
        targets = frozenset((r + 1) * stride + c + 1 for r, c in cells[:num_boxes])
        player = (cells[num_boxes][0] + 1) * stride + cells[num_boxes][1] + 1
        floor_index = {(r + 1) * stride + c + 1 for r, c in floor}
        all_cells = set(range((rows + 2) * stride))
        walls = frozenset(all_cells - floor_index)  # includes the invisible padding ring
        solved = Room(rows, cols, walls, targets, targets, player)
        live = live_cells(solved)
        best = None  # (plan length, -rank, player, boxes, plan): the longest plan, then the best score
        candidates = reverse_play(rng, solved, depth)[:CANDIDATES_PER_ROOM]
        for rank, (_, start_player, start_boxes) in enumerate(candidates):
            plan = solve(solved, start_player, start_boxes, max_depth=max_turns, live=live)
            if plan and (best is None or len(plan) > best[0]):
                best = (len(plan), -rank, start_player, start_boxes, plan)
        if best is not None:
            _, _, start_player, start_boxes, plan = best
            return Room(rows, cols, walls, targets, start_boxes, start_player), tuple(plan)
    raise ValueError(
        f"no solvable Sokoban room within max_turns={max_turns} after {max_attempts} attempts "
        f"(seed={seed}, dim={rows}x{cols}, num_boxes={num_boxes}, depth={depth}); "
        "use a larger dim, fewer boxes or more max_turns"
    )
