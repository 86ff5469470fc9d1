"""A step's rows cut into the mini-batches of the policy update (docs/methods.md §5.0, §6), the
same split in every backend: sequential, no shuffle, like the authors."""
from __future__ import annotations

from typing import Optional


def mini_batch_slices(n_rows: int, *, num_mini_batches: int, mini_batch_size: Optional[int]) -> list[slice]:
    """Sequential mini-batches: `mini_batch_size` rows each if given, else `num_mini_batches` near-equal parts."""
    if mini_batch_size:
        return [slice(i, min(i + mini_batch_size, n_rows)) for i in range(0, n_rows, mini_batch_size)]
    k = max(1, min(num_mini_batches, n_rows))
    bounds = [round(i * n_rows / k) for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
