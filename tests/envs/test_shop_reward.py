"""WebShop's purchase score on hand-made products (arena/envs/shop_reward.py)."""
from __future__ import annotations

import pytest

from arena.envs.shop_catalogue import Goal, Product
from arena.envs.shop_reward import best_options, purchase_score

OPTIONS = {"color": ("red", "blue"), "size": ("medium", "large")}
GOAL = Goal(target_id="b0001", type="jacket", attributes=("warm", "hooded"),
            options={"color": "blue", "size": "large"}, price_upper=40)


def product(kind="jacket", attributes=("warm", "hooded", "fleece"), price=35, options=OPTIONS):
    return Product(id="b0009", type=kind, brand="acme", attributes=attributes, options=options, price=price)


@pytest.mark.parametrize("item, selected, expected", [
    # total = r_type * (n_att + n_opt + r_price) / (|attrs| + |options| + 1), here / (2 + 2 + 1) = / 5
    # all match: (2 + 2 + 1) / 5 = 1
    (product(), {"color": "blue", "size": "large"}, 1.0),
    # wrong color and over budget (45 > 40): (2 + 1 + 0) / 5 = 0.6
    (product(price=45), {"color": "red", "size": "large"}, 0.6),
    # a shirt with every attribute: r_type = 0, so 0 whatever the rest
    (product(kind="shirt"), {"color": "blue", "size": "large"}, 0.0),
    # one attribute, no option chosen, price at the limit (40 <= 40): (1 + 0 + 1) / 5 = 0.4
    (product(attributes=("warm", "fleece", "windproof"), price=40), {}, 0.4),
])
def test_hand_worked_scores(item, selected, expected):
    assert purchase_score(item, selected, GOAL) == pytest.approx(expected)


def test_three_attribute_goal():
    """Goal with 3 attributes: denominator 3 + 2 + 1 = 6. The product has 2 of them ('fleece'
    missing), both options and a price under the limit: (2 + 2 + 1) / 6 = 5/6."""
    goal = Goal("b0001", "jacket", ("warm", "hooded", "fleece"), {"color": "blue", "size": "large"}, 40)
    item = product(attributes=("warm", "hooded", "waterproof"), price=10)
    assert purchase_score(item, {"color": "blue", "size": "large"}, goal) == pytest.approx(5 / 6)


def test_best_options_take_the_goal_value_where_sold():
    assert best_options(product(), GOAL) == {"color": "blue", "size": "large"}
    # not sold in blue: the first color stands in (and scores no option point)
    other = product(options={"color": ("black", "red"), "size": ("medium", "large")})
    assert best_options(other, GOAL) == {"color": "black", "size": "large"}
    assert purchase_score(other, best_options(other, GOAL), GOAL) == pytest.approx(4 / 5)
