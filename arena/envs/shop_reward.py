"""WebShop's reward for a purchase (docs/methods.md, Rewards; WebShop's engine/goal.py get_reward).

    total = r_type * (n_att + n_opt + r_price) / (|goal attributes| + |goal options| + 1)

- n_att: goal attributes the product has. WebShop fuzzy-matches (token_set_ratio > 85) against the
  product's attribute list, then looks for the phrase in title, bullet points and description;
  our attributes are canonical phrases, so the test is membership in `product.attributes` or in
  the title.
- n_opt: goal option values among the options the agent selected (WebShop: fuzzy match > 85;
  ours: exact value).
- r_price: 1 if price <= price_upper else 0.
- r_type: WebShop scores the overlap of the nouns of the product's and the goal's names
  (title_score = shared nouns / goal nouns; r_type = 0 if title_score == 0, 0.1 below 0.1, 0.5
  when neither query, category nor title match, else 1). Our names are one noun (the type), so
  title_score is 1 (same type: r_type = 1) or 0 (r_type = 0).

The episode reward follows the authors' verl-agent WebShop env: 10 if total == 1.0 else 0; the
raw total is kept as `task_score`.
"""
from __future__ import annotations

from .shop_catalogue import Goal, Product


def purchase_score(product: Product, selected: dict, goal: Goal) -> float:
    """WebShop's total reward (module docstring) for buying `product` with options `selected`."""
    r_type = 1.0 if product.type == goal.type else 0.0
    n_att = sum(1 for a in goal.attributes if a in product.attributes or a in product.title)
    chosen = set(selected.values())
    n_opt = sum(1 for value in goal.options.values() if value in chosen)
    r_price = 1.0 if product.price <= goal.price_upper else 0.0
    return r_type * (n_att + n_opt + r_price) / (len(goal.attributes) + len(goal.options) + 1)


def best_options(product: Product, goal: Goal) -> dict:
    """The options that maximise the score: the goal's value where the product has it, else its first."""
    return {name: goal.options[name] if goal.options[name] in values else values[0]
            for name, values in product.options.items()}
