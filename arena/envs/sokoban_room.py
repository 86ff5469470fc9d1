"""Sokoban rooms: the immutable room type, the text legend, layout parsing and rendering.

Cells are addressed by one integer index in a *padded* grid: the visible layout of
`rows x cols` cells is surrounded by an invisible ring of walls, so the cell at visible
(r, c) has index `(r + 1) * stride + (c + 1)` with `stride = cols + 2`. The ring makes every
move from a visible cell land on a valid index, so no bounds checks are needed: moving in a
direction adds its offset (`up` = -stride, `down` = +stride, `left` = -1, `right` = +1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

# The text legend (ASCII, one character per cell, one line per row).
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "*", "P", "S"
LEGEND = {
    WALL: "wall",
    FLOOR: "empty floor",
    TARGET: "empty target",
    BOX: "box",
    BOX_ON_TARGET: "box on a target",
    PLAYER: "you (the player)",
    PLAYER_ON_TARGET: "you standing on a target",
}
ACTIONS = ("up", "down", "left", "right")


def direction_offsets(stride: int) -> dict[str, int]:
    """Index offset of one step in each action direction of a padded grid with `stride` columns."""
    return {"up": -stride, "down": stride, "left": -1, "right": 1}


@dataclass(frozen=True)
class Room:
    """A room and its start state (boxes and player); all positions are padded indices."""

    rows: int  # visible rows (including the room's own outer wall, if it has one)
    cols: int  # visible columns
    walls: frozenset  # wall cells, including the invisible padding ring
    targets: frozenset  # target cells
    boxes: frozenset  # start positions of the boxes
    player: int  # start position of the player

    @property
    def stride(self) -> int:
        return self.cols + 2

    def index(self, r: int, c: int) -> int:
        """Padded index of the visible cell (r, c)."""
        return (r + 1) * self.stride + (c + 1)


def padding_ring(rows: int, cols: int) -> set:
    """Indices of the invisible wall ring around a rows x cols layout."""
    stride = cols + 2
    ring = {c for c in range(stride)} | {(rows + 1) * stride + c for c in range(stride)}
    ring |= {r * stride for r in range(rows + 2)} | {r * stride + cols + 1 for r in range(rows + 2)}
    return ring


def parse_layout(lines: Sequence[str]) -> Room:
    """Build a Room from text rows in the legend above (whitespace around each row is ignored)."""
    grid = [line.strip() for line in lines if line.strip()]
    if not grid:
        raise ValueError("empty Sokoban layout")
    rows, cols = len(grid), len(grid[0])
    if any(len(line) != cols for line in grid):
        raise ValueError(f"Sokoban layout rows must have equal length, got {[len(g) for g in grid]}")
    stride = cols + 2
    walls, targets, boxes, players = padding_ring(rows, cols), set(), set(), []
    for r, line in enumerate(grid):
        for c, ch in enumerate(line):
            i = (r + 1) * stride + (c + 1)
            if ch not in LEGEND:
                raise ValueError(f"unknown Sokoban cell {ch!r} at row {r}, col {c}; valid: {' '.join(LEGEND)}")
            if ch == WALL:
                walls.add(i)
            if ch in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.add(i)
            if ch in (BOX, BOX_ON_TARGET):
                boxes.add(i)
            if ch in (PLAYER, PLAYER_ON_TARGET):
                players.append(i)
    if len(players) != 1:
        raise ValueError(f"a Sokoban layout needs exactly one player ('P' or 'S'), found {len(players)}")
    if not boxes or len(boxes) != len(targets):
        raise ValueError(f"a Sokoban layout needs as many targets as boxes (>= 1), got {len(boxes)} boxes, {len(targets)} targets")
    return Room(rows, cols, frozenset(walls), frozenset(targets), frozenset(boxes), players[0])


class Renderer:
    """Draws states of one room as text; the static cells are computed once."""

    def __init__(self, room: Room, render_wall: bool = True):
        self.room = room
        stride = room.stride
        base = [WALL] * ((room.rows + 2) * stride)  # [padded cells]
        for r in range(room.rows):
            for c in range(room.cols):
                i = room.index(r, c)
                base[i] = WALL if i in room.walls else (TARGET if i in room.targets else FLOOR)
        self.base = base
        # without the wall, the outermost ring of the visible layout is not drawn
        strip = 0 if render_wall else 1
        if room.rows <= 2 * strip or room.cols <= 2 * strip:
            raise ValueError(f"render_wall=False needs a room of at least 3x3 cells, got {room.rows}x{room.cols}")
        self.row_slices = [
            ((r + 1) * stride + 1 + strip, (r + 1) * stride + 1 + room.cols - strip)
            for r in range(strip, room.rows - strip)
        ]

    def __call__(self, player: int, boxes: frozenset) -> str:
        cells = self.base.copy()
        targets = self.room.targets
        for b in boxes:
            cells[b] = BOX_ON_TARGET if b in targets else BOX
        cells[player] = PLAYER_ON_TARGET if player in targets else PLAYER
        return "\n".join("".join(cells[start:end]) for start, end in self.row_slices)
