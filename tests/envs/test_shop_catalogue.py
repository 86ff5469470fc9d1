"""The shop catalogue, goals and BM25 search (arena/envs/shop_catalogue.py, shop_search.py)."""
from __future__ import annotations

import math
from collections import Counter

import pytest

from arena.envs.shop_catalogue import (COLORS, EVAL_EVERY, PRODUCT_TYPES, SIZES, Product, cached_catalogue,
                                       generate_catalogue, make_goal, target_products, vocabulary)
from arena.envs.shop_reward import best_options, purchase_score
from arena.envs.shop_search import ShopSearch

CATALOGUE = cached_catalogue(3000, 0)


def test_catalogue_is_seeded_and_structured():
    assert generate_catalogue(200, seed=3) == generate_catalogue(200, seed=3)
    assert generate_catalogue(200, seed=3) != generate_catalogue(200, seed=4)
    assert len(CATALOGUE) == 3000 and len({p.id for p in CATALOGUE}) == 3000
    assert Counter(p.type for p in CATALOGUE) == {t: 300 for t in PRODUCT_TYPES}
    for p in CATALOGUE:
        assert len(set(p.attributes)) == 3 and set(p.attributes) <= set(PRODUCT_TYPES[p.type])
        assert p.title == f"{p.brand} {p.attributes[0]} {p.attributes[1]} {p.type}"  # the third is on the item page
        assert 2 <= len(p.options["color"]) <= 4 and set(p.options["color"]) <= set(COLORS)
        assert 2 <= len(p.options["size"]) <= 3 and set(p.options["size"]) <= set(SIZES)
    with pytest.raises(ValueError, match="at least"):
        generate_catalogue(49)


def test_goal_splits_are_disjoint_and_every_goal_is_satisfiable():
    train_ids = {p.id for p in target_products(CATALOGUE, "train")}
    eval_ids = {p.id for p in target_products(CATALOGUE, "eval")}
    assert not train_ids & eval_ids and len(eval_ids) == 3000 // EVAL_EVERY
    for split in ("train", "eval"):  # both splits cover every type
        assert {p.type for p in target_products(CATALOGUE, split)} == set(PRODUCT_TYPES)
    for split, ids in (("train", train_ids), ("eval", eval_ids)):
        for i in range(100):
            goal = make_goal(CATALOGUE, split, i)
            assert goal == make_goal(CATALOGUE, split, i) and goal.target_id in ids
            target = CATALOGUE[int(goal.target_id[1:])]
            # the target itself scores 1 with the goal's options, under the price limit
            assert purchase_score(target, best_options(target, goal), goal) == 1.0
            assert target.price < goal.price_upper <= target.price + 10
            assert 2 <= len(goal.attributes) <= 3 and goal.type in goal.instruction
    with pytest.raises(ValueError, match="train, eval"):
        target_products(CATALOGUE, "test")


def test_every_goal_has_near_misses():
    """Products of the goal's type sharing its attributes but failing options or price exist,
    so picking the first title that looks right is not enough (at least one for every goal,
    several on average: ~5 products share each type and three attributes)."""
    counts = []
    for i in range(100):
        goal = make_goal(CATALOGUE, "train", i)
        lookalikes = [p for p in CATALOGUE if p.type == goal.type and set(goal.attributes) <= set(p.attributes)]
        misses = [p for p in lookalikes if purchase_score(p, best_options(p, goal), goal) < 1.0]
        assert misses, goal
        counts.append(len(misses))
    assert sum(counts) / len(counts) >= 5


def test_vocabulary_is_small():
    # types + brands + colors + sizes + attribute words: a few hundred pieces for the tokenizer
    assert len(vocabulary()) < 200


def product(i, attributes, kind="jacket"):
    return Product(f"b{i:04d}", kind, "acme", attributes, {"color": ("red", "blue"), "size": ("small", "large")}, 20)


def test_bm25_ranks_by_matching_words_and_matches_the_lucene_formula():
    """Three products; 'hooded' is in product 1 only, 'warm' in products 0 and 1.

    N = 3, df(hooded) = 1: idf = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3).
    Product 1's indexed text (title + attributes + options) has the title twice-counted words
    'warm', 'hooded' (title and attribute list) -> tf(hooded) = 2. All three texts have the same
    length L, so |d| / avgdl = 1 and (Lucene's BM25 has no (k1 + 1) factor)
    score = idf * tf / (tf + k1) = idf * 2 / (2 + 1.5) = idf * 4/7.
    """
    products = (product(0, ("warm", "fleece", "windproof")), product(1, ("warm", "hooded", "fleece")),
                product(2, ("lightweight", "fleece", "windproof")))
    engine = ShopSearch(products)
    assert [p.id for p in engine.search("warm hooded")] == ["b0001", "b0000"]  # b0002 has neither: left out
    assert engine.retriever.get_scores(["hooded"])[1] == pytest.approx(math.log(8 / 3) * 4 / 7, rel=1e-5)
    assert engine.search("") == [] and engine.search("unknownword") == [] and engine.search("the and") == []
    # 'fleece' has tf 2 in products 0 and 2 (title + attributes), tf 1 in product 1 (attributes
    # only): the tie between 0 and 2 keeps catalogue order, then product 1
    assert [p.id for p in engine.search("fleece")] == ["b0000", "b0002", "b0001"]
