"""The shop task's expert (for `arena envs check` and BC demos; docs/testbed.md, The shop task).

It reads the instruction (the goal), searches for its words, picks the result it can score best
on and buys it with the goal's options:

- search page: search[<goal attributes> <type> <color> <size>];
- results page: the best result of the whole result list, by WebShop's score with the best
  options (ties: the higher-ranked one); click it if it is on this page, else page towards it;
- item page: go back if it is not that product, else click each goal option it lacks, then buy.

The choice reads the catalogue (a privileged expert, like Sokoban's solver and household's
walkthrough), so it is optimal for the results a query returns (the 50 results of its query
hold a product that scores 1 for every one of 6000 goals checked, 3000 of each split); it is recomputed from the
current page, so it also recovers after someone else's moves.
"""
from __future__ import annotations

from typing import Optional

from .shop_catalogue import OPTION_NAMES, Goal, Product
from .shop_pages import BACK, BUY, NEXT, PREV, RESULTS_PER_PAGE
from .shop_reward import best_options, purchase_score


def expert_query(goal: Goal) -> str:
    return " ".join((*goal.attributes, goal.type, goal.options["color"], goal.options["size"]))


def best_result(results: list[Product], goal: Goal) -> Optional[int]:
    """Index of the result with the highest score (best options); the first one on ties."""
    if not results:
        return None
    scores = [purchase_score(p, best_options(p, goal), goal) for p in results]
    return max(range(len(results)), key=lambda i: (scores[i], -i))


def expert_click(page: str, goal: Goal, results: list[Product], results_page: int,
                 item: Optional[Product], selected: dict) -> str:
    """The expert's action on the current page (see the module docstring)."""
    if page == "search":
        return f"search[{expert_query(goal)}]"
    best = best_result(results, goal)
    if page == "results":
        if best is None:
            return f"click[{BACK}]"
        target_page = best // RESULTS_PER_PAGE
        if target_page == results_page:
            return f"click[{results[best].id}]"
        return f"click[{NEXT if target_page > results_page else PREV}]"
    if best is None or item is None or item.id != results[best].id:
        return f"click[{PREV}]"
    wanted = best_options(item, goal)
    for name in OPTION_NAMES:
        if selected.get(name) != wanted[name]:
            return f"click[{wanted[name]}]"
    return f"click[{BUY}]"
