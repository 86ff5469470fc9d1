"""The shop task's product catalogue and goals, generated from a seed (docs/testbed.md, The shop task).

WebShop scrapes about a million Amazon products; we generate a few thousand with the same
structure, from a closed vocabulary small enough for the embedded tokenizer:

- a product has a `type` (one of `PRODUCT_TYPES`), a `brand`, three `attributes` from its type's
  pool, `options` (the colors and sizes it is sold in) and a whole-dollar `price`;
- its title names the brand, two of the three attributes and the type, so the third attribute
  and the options are seen only on the item page (reading the page matters);
- about six products share each (type, three attributes) combination and differ in options and
  price, and many more share two attributes: those are the near-misses a search returns.

A goal (WebShop's instruction) is made from one target product: its type, two or three of its
attributes, one of its colors, one of its sizes and a price limit, the next multiple of 10
dollars above the target's price. Targets are split by product id: product i is made in round
i // len(PRODUCT_TYPES) (one product of each type a round); the products of every
EVAL_EVERY-th round are the targets of evaluation goals, the others of training goals, so no
evaluation goal is a training goal and both splits cover every type.
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field

# type -> its attribute pool (8 each; some are two words, as WebShop's "machine washable")
PRODUCT_TYPES: dict[str, tuple[str, ...]] = {
    "shirt": ("cotton", "slim fit", "long sleeve", "breathable", "wrinkle free", "casual", "soft", "machine washable"),
    "shoes": ("running", "leather", "waterproof", "lightweight", "non slip", "wide", "breathable", "casual"),
    "jacket": ("waterproof", "warm", "hooded", "windproof", "lightweight", "fleece", "slim fit", "machine washable"),
    "backpack": ("waterproof", "lightweight", "laptop", "travel", "durable", "large capacity", "leather", "anti theft"),
    "lamp": ("led", "dimmable", "wireless", "modern", "rechargeable", "bedside", "touch control", "energy saving"),
    "mug": ("ceramic", "insulated", "large capacity", "dishwasher safe", "travel", "durable", "modern", "leak proof"),
    "shampoo": ("natural", "sulfate free", "long lasting", "organic", "dry hair", "sensitive skin", "vegan", "travel"),
    "headphones": ("wireless", "noise cancelling", "long lasting", "lightweight", "bass", "foldable", "sports", "rechargeable"),
    "blanket": ("soft", "warm", "fleece", "machine washable", "cotton", "lightweight", "hypoallergenic", "large capacity"),
    "pillow": ("memory foam", "cooling", "hypoallergenic", "soft", "firm", "organic", "machine washable", "cotton"),
}
BRANDS = ("acme", "nova", "zenith", "orbit", "pioneer", "summit", "harbor", "willow", "ember", "atlas",
          "cedar", "falcon", "lumen", "marble", "nimbus", "quartz", "raven", "sierra", "tundra", "velvet")
COLORS = ("black", "white", "red", "blue", "green", "gray", "pink", "brown")
SIZES = ("small", "medium", "large", "xlarge")
OPTION_NAMES = ("color", "size")
EVAL_EVERY = 5
MIN_PRICE, MAX_PRICE = 5, 95


@dataclass(frozen=True)
class Product:
    id: str  # "b0412": WebShop's ASIN stand-in
    type: str
    brand: str
    attributes: tuple[str, ...]  # three, the first two are in the title
    options: dict = field(hash=False)  # {"color": (...), "size": (...)}, each sorted as in COLORS/SIZES
    price: int  # dollars

    @property
    def title(self) -> str:
        """Brand, the first two attributes, the type: 'acme warm hooded jacket'."""
        return " ".join((self.brand, *self.attributes[:2], self.type))

    @property
    def search_text(self) -> str:
        """What the search index holds (WebShop indexes title, features and options)."""
        return " ".join((self.title, *self.attributes, *self.options["color"], *self.options["size"]))


@dataclass(frozen=True)
class Goal:
    target_id: str
    type: str
    attributes: tuple[str, ...]
    options: dict = field(hash=False)  # {"color": "blue", "size": "large"}
    price_upper: int

    @property
    def instruction(self) -> str:
        """WebShop-style: 'i need a warm and hooded jacket in blue color, size large, price lower than 40 dollars'."""
        attrs = " and ".join(self.attributes)
        return (f"i need a {attrs} {self.type} in {self.options['color']} color, size {self.options['size']}, "
                f"price lower than {self.price_upper} dollars")


def _subset(rng: random.Random, pool, k_min: int, k_max: int) -> tuple[str, ...]:
    chosen = set(rng.sample(pool, rng.randint(k_min, k_max)))
    return tuple(x for x in pool if x in chosen)  # canonical order: the pool's


def generate_catalogue(n_products: int = 3000, seed: int = 0) -> tuple[Product, ...]:
    """`n_products` products from a `random.Random(seed)`; ids b0000.. in generation order."""
    if n_products < EVAL_EVERY * len(PRODUCT_TYPES):
        raise ValueError(f"the shop catalogue needs at least {EVAL_EVERY * len(PRODUCT_TYPES)} products, "
                         f"got {n_products}")
    rng = random.Random(seed)
    types = list(PRODUCT_TYPES)
    products = []
    for i in range(n_products):
        kind = types[i % len(types)]  # every type equally often
        attributes = tuple(rng.sample(PRODUCT_TYPES[kind], 3))  # random order: the title shows the first two
        options = {"color": _subset(rng, COLORS, 2, 4), "size": _subset(rng, SIZES, 2, 3)}
        products.append(Product(id=f"b{i:04d}", type=kind, brand=rng.choice(BRANDS), attributes=attributes,
                                options=options, price=rng.randint(MIN_PRICE, MAX_PRICE)))
    return tuple(products)


@functools.lru_cache(maxsize=4)
def cached_catalogue(n_products: int, seed: int) -> tuple[Product, ...]:
    return generate_catalogue(n_products, seed)


def target_products(catalogue, split: str) -> list[Product]:
    """The products that goals of `split` ("train" | "eval") are made from (disjoint by id)."""
    if split not in ("train", "eval"):
        raise ValueError(f"unknown goal split {split!r}; valid: train, eval")
    want_eval = split == "eval"
    n_types = len(PRODUCT_TYPES)
    return [p for i, p in enumerate(catalogue) if ((i // n_types) % EVAL_EVERY == EVAL_EVERY - 1) == want_eval]


def make_goal(catalogue, split: str, index: int) -> Goal:
    """Goal `index` of a split: the target is drawn from the split's products by Random(index)."""
    rng = random.Random(f"{split}-{index}")
    target = rng.choice(target_products(catalogue, split))
    kept = set(rng.sample(target.attributes, rng.randint(2, 3)))
    attributes = tuple(a for a in target.attributes if a in kept)
    options = {name: rng.choice(target.options[name]) for name in OPTION_NAMES}
    price_upper = (target.price // 10 + 1) * 10  # the next multiple of 10 above the price
    return Goal(target_id=target.id, type=target.type, attributes=attributes, options=options,
                price_upper=price_upper)


def vocabulary() -> set[str]:
    """Every word the catalogue and goals can use (for tokenizer-coverage checks)."""
    words = set(PRODUCT_TYPES) | set(BRANDS) | set(COLORS) | set(SIZES)
    for pool in PRODUCT_TYPES.values():
        for attribute in pool:
            words.update(attribute.split())
    return words
