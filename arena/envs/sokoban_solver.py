"""Sokoban moves and an optimal breadth-first solver over (player, boxes) states.

One action moves the player one cell; walking into a box pushes it one cell further when that
cell is free (no wall, no box); otherwise the move is blocked and nothing changes. The solver
counts actions (player moves, pushes included), so its plan is the shortest episode.
"""
from __future__ import annotations

from typing import Optional

from .sokoban_room import Room, direction_offsets

State = tuple  # (player: int, boxes: frozenset[int])


def try_move(walls: frozenset, player: int, boxes: frozenset, delta: int) -> tuple[int, frozenset]:
    """The state after one move by `delta`; the same (player, boxes) when the move is blocked."""
    ahead = player + delta
    if ahead in walls:
        return player, boxes
    if ahead in boxes:
        beyond = ahead + delta
        if beyond in walls or beyond in boxes:
            return player, boxes
        return ahead, (boxes - {ahead}) | {beyond}
    return ahead, boxes


def live_cells(room: Room) -> frozenset:
    """Cells from which a lone box can still be pushed onto some target (others are dead).

    A box pushed from b to b + d needs the player at b - d, so in reverse a box on t can have
    come from t - d iff t - d and t - 2d are not walls. The live cells are the targets plus
    everything reachable from them by such reverse pulls (other boxes ignored, so this is a
    safe under-approximation of deadness).
    """
    live = set(room.targets)
    frontier = list(room.targets)
    deltas = direction_offsets(room.stride).values()
    while frontier:
        t = frontier.pop()
        for d in deltas:
            source, player_spot = t - d, t - 2 * d
            if source in room.walls or source in live or player_spot in room.walls:
                continue
            live.add(source)
            frontier.append(source)
    return frozenset(live)


def solve(
    room: Room,
    player: int,
    boxes: frozenset,
    *,
    max_depth: Optional[int] = None,
    live: Optional[frozenset] = None,
) -> Optional[list]:
    """Shortest action list that puts every box on a target, or None (unsolvable or longer
    than `max_depth` actions). [] if the state is already solved."""
    targets, walls = room.targets, room.walls
    if boxes <= targets:
        return []
    live = live_cells(room) if live is None else live
    if not boxes <= live:
        return None
    moves = [(name, delta) for name, delta in direction_offsets(room.stride).items()]
    start = (player, boxes)
    parent: dict = {start: None}  # state -> (previous state, action)
    frontier = [start]
    depth = 0
    while frontier and (max_depth is None or depth < max_depth):
        depth += 1
        next_frontier = []
        for state in frontier:
            p, bx = state
            for name, d in moves:
                q = p + d
                if q in walls:
                    continue
                if q in bx:
                    beyond = q + d
                    if beyond in walls or beyond in bx or beyond not in live:
                        continue
                    new_boxes = (bx - {q}) | {beyond}
                else:
                    new_boxes = bx
                new_state = (q, new_boxes)
                if new_state in parent:
                    continue
                parent[new_state] = (state, name)
                if new_boxes is not bx and new_boxes <= targets:
                    return _backtrack(parent, new_state)
                next_frontier.append(new_state)
        frontier = next_frontier
    return None


def _backtrack(parent: dict, state: State) -> list:
    plan = []
    while parent[state] is not None:
        state, action = parent[state]
        plan.append(action)
    plan.reverse()
    return plan


def plan_states(room: Room, player: int, boxes: frozenset, plan: list) -> dict:
    """Map each state along `plan` to the plan's action from it (the expert's lookup table).

    The suffix of a shortest plan is a shortest plan from its own first state, so any state on
    the path keeps a valid optimal next action even after the agent strays and comes back.
    """
    offsets = direction_offsets(room.stride)
    table = {}
    for action in plan:
        table[(player, boxes)] = action
        player, boxes = try_move(room.walls, player, boxes, offsets[action])
    return table

