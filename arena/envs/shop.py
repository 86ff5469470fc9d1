"""The shop task: a WebShop-like shopping environment (docs/testbed.md, The shop task).

An episode is one goal (shop_catalogue): the agent searches the generated catalogue (BM25,
shop_search), opens results, chooses options and buys. Rewards follow the authors' WebShop
env (docs/methods.md, Rewards):

    r_t = 10 * [task_score == 1]   on the turn that buys (done), else 0
    task_score = WebShop's purchase score (shop_reward.purchase_score), kept in info

won = (task_score == 1). The episode also ends (done, won=False) after `max_turns` turns
(15, the authors' WebShop env.max_steps). Seeds: training seed s plays training goal s;
eval_seed(i) plays evaluation goal i; the two goal sets have disjoint target products.

Action validity follows the authors' WebShop projection, which checks the format only: any
`search[...]`/`click[...]` is admissible; one the page does not offer is a no-op turn
("Nothing happens." above the same page).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .base import EVAL_SEED_OFFSET
from .shop_catalogue import OPTION_NAMES, Goal, make_goal
from .shop_expert import expert_click
from .shop_pages import (BACK, BUY, NEXT, PREV, SEARCH_PAGE, item_buttons, page_products,
                         parse_action, render_item, render_results, results_buttons)
from .shop_reward import purchase_score
from .shop_search import cached_search
from .spec import AT_LEAST_ONE, EnvSpec

DEFAULT_MAX_TURNS = 15
NO_OP_PREFIX = "Nothing happens.\n"
RESULTS_SHOWN = 50  # ten pages of five (WebShop shows 50 results, ten a page)

INSTRUCTION = (
    "You are shopping on a web store for the item the task describes. Search with "
    "search[your query]; on a results page click[product id] opens a product; on a product page "
    "click[option] picks a color or size and click[buy now] buys it. click[next >], click[< prev] "
    "and click[back to search] move between pages."
)


@dataclass(frozen=True)
class ShopKwargs:
    """env.kwargs of shop (arena.envs.spec): the one place for their defaults."""
    max_turns: int = field(default=DEFAULT_MAX_TURNS, metadata=AT_LEAST_ONE)
    n_products: int = field(default=3000, metadata=AT_LEAST_ONE)  # catalogue size
    catalogue_seed: int = 0
    win_reward: float = 10.0


class ShopEnv:
    name = "shop"
    instruction = INSTRUCTION

    def __init__(self, **kwargs: Any):
        kw = ShopKwargs(**kwargs)  # the defaults: ShopKwargs
        if kw.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {kw.max_turns}")
        self.max_turns = int(kw.max_turns)
        self.win_reward = float(kw.win_reward)
        self.search_engine = cached_search(int(kw.n_products), int(kw.catalogue_seed))
        self.catalogue = self.search_engine.products
        self.goal: Optional[Goal] = None

    def goal_for_seed(self, seed: int) -> Goal:
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"seeds are >= 0, got {seed}")
        if seed >= EVAL_SEED_OFFSET:
            return make_goal(self.catalogue, "eval", seed - EVAL_SEED_OFFSET)
        return make_goal(self.catalogue, "train", seed)

    # --- state -------------------------------------------------------------------------------
    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self.goal = self.goal_for_seed(seed)
        self.page, self.query, self.results, self.results_page = "search", "", [], 0
        self.item, self.selected, self.turn, self.done = None, {}, 0, False
        return self._observation(), self._info(won=False, task_score=0.0, admissible=True, effective=True)

    def _observation(self) -> str:
        if self.page == "search":  # WebShop shows the instruction on its search page
            return f"Instruction: {self.goal.instruction}\n{SEARCH_PAGE}"
        if self.page == "results":
            return render_results(self.query, self.results, self.results_page)
        return render_item(self.item, self.selected)

    def buttons(self) -> list[str]:
        """What click[...] accepts on the current page."""
        if self.page == "results":
            shown = [p.id for p in page_products(self.results, self.results_page)]
            return shown + results_buttons(len(self.results), self.results_page)
        if self.page == "item":
            return item_buttons(self.item)
        return []

    def admissible_actions(self) -> list[str]:
        return ["search[...]"] if self.page == "search" else [f"click[{b}]" for b in self.buttons()]

    def _info(self, *, won: bool, task_score: float, admissible: bool, effective: bool, truncated: bool = False) -> dict:
        # admissible: the action's format (is_admissible); effective: the page offered it (not a no-op)
        return {"won": won, "task_score": task_score, "admissible": admissible, "effective": effective, "turn": self.turn,
                "truncated": truncated, "page": self.page, "task": self.goal.instruction,
                "admissible_actions": self.admissible_actions(), "goal_target": self.goal.target_id}

    # --- protocol ----------------------------------------------------------------------------
    def is_admissible(self, action: str) -> bool:
        """Format only, as the authors' WebShop projection: search[...] or click[...]."""
        return parse_action(action) is not None

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.goal is None or self.done:
            raise RuntimeError("call reset(seed) before stepping the shop env")
        self.turn += 1
        moved, bought = self._apply(parse_action(action))
        score = purchase_score(self.item, self.selected, self.goal) if bought else 0.0
        won = bought and score == 1.0
        truncated = not bought and self.turn >= self.max_turns
        self.done = bought or truncated
        obs = self._observation() if moved else NO_OP_PREFIX + self._observation()
        if bought:
            obs = f"You bought {self.item.title}. Score {score:.2f}."
        reward = self.win_reward if won else 0.0
        info = self._info(won=won, task_score=score, admissible=self.is_admissible(action), effective=moved,
                          truncated=truncated)
        return obs, reward, self.done, info

    def _apply(self, parsed: Optional[tuple[str, str]]) -> tuple[bool, bool]:
        """Carry out a parsed action; returns (the page changed or an option was set, bought)."""
        if parsed is None:
            return False, False
        verb, argument = parsed
        if verb == "search":
            if self.page != "search":
                return False, False
            self.query, self.page, self.results_page = argument, "results", 0
            self.results = self.search_engine.search(argument, k=RESULTS_SHOWN)
            return True, False
        if argument not in self.buttons():
            return False, False
        if argument == BACK:
            self.page, self.item, self.selected = "search", None, {}
        elif self.page == "results" and argument in (NEXT, PREV):
            self.results_page += 1 if argument == NEXT else -1
        elif self.page == "results":
            self.page, self.item, self.selected = "item", next(p for p in self.results if p.id == argument), {}
        elif argument == PREV:
            self.page, self.item, self.selected = "results", None, {}
        elif argument == BUY:
            return True, True
        else:  # an option value: it belongs to exactly one option name
            name = next(n for n in OPTION_NAMES if argument in self.item.options[n])
            self.selected[name] = argument
        return True, False

    def expert_action(self) -> Optional[str]:
        if self.goal is None or self.done:
            return None
        return expert_click(self.page, self.goal, self.results, self.results_page, self.item, self.selected)


SPEC = EnvSpec(name="shop", kwargs=ShopKwargs, factory=ShopEnv)
