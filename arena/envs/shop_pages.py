"""The shop task's pages as text and its action grammar (docs/testbed.md, The shop task).

WebShop's text mode shows four kinds of page; we keep three (the item page shows the features
that WebShop puts behind its "Description"/"Features" tabs):

- search:  "Search: type search[your query]"
- results: five products a page, each "[b0412] acme warm hooded jacket $45", then the buttons;
- item:    the title and price, the features, each option's values as [buttons], the options
           chosen so far, then the buttons.

Actions, as in WebShop: `search[query]` on the search page and `click[button]` elsewhere, where
a button is a product id, an option value, `buy now`, `next >`, `< prev` or `back to search`.
"""
from __future__ import annotations

import re
from typing import Optional

from .shop_catalogue import OPTION_NAMES, Product

RESULTS_PER_PAGE = 5
BUY, NEXT, PREV, BACK = "buy now", "next >", "< prev", "back to search"
SEARCH_PAGE = "Search: type search[your query]"
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


def parse_action(action: str) -> Optional[tuple[str, str]]:
    """'click[ Buy Now ]' -> ('click', 'buy now'); None when it is not search[...] / click[...]
    with a non-empty argument. Arguments are lowercased and their spaces collapsed."""
    match = _ACTION.match(str(action))
    if not match:
        return None
    argument = " ".join(match.group(2).lower().split())
    return (match.group(1).lower(), argument) if argument else None


def page_count(n_results: int) -> int:
    return max(1, -(-n_results // RESULTS_PER_PAGE))  # ceil(n / per_page), at least one page


def results_buttons(n_results: int, page: int) -> list[str]:
    """The non-product buttons of a results page (page is 0-based)."""
    buttons = [NEXT] if page + 1 < page_count(n_results) else []
    return buttons + ([PREV] if page > 0 else []) + [BACK]


def page_products(results: list[Product], page: int) -> list[Product]:
    return results[page * RESULTS_PER_PAGE:(page + 1) * RESULTS_PER_PAGE]


def render_results(query: str, results: list[Product], page: int) -> str:
    if not results:
        return f"No results for '{query}'.\n[{BACK}]"
    lines = [f"Results for '{query}', page {page + 1} of {page_count(len(results))}:"]
    lines += [f"[{p.id}] {p.title} ${p.price}" for p in page_products(results, page)]
    lines.append(" ".join(f"[{b}]" for b in results_buttons(len(results), page)))
    return "\n".join(lines)


def render_item(product: Product, selected: dict) -> str:
    lines = [f"[{product.id}] {product.title} ${product.price}", "features: " + ", ".join(product.attributes)]
    for name in OPTION_NAMES:
        lines.append(f"{name}: " + " ".join(f"[{v}]" for v in product.options[name]))
    chosen = ", ".join(f"{name} {selected[name]}" for name in OPTION_NAMES if name in selected)
    lines.append(f"chosen: {chosen or 'none'}")
    lines.append(" ".join(f"[{b}]" for b in (BUY, PREV, BACK)))
    return "\n".join(lines)


def item_buttons(product: Product) -> list[str]:
    return [v for name in OPTION_NAMES for v in product.options[name]] + [BUY, PREV, BACK]
