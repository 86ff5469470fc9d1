"""Lexical search over the shop catalogue: BM25 from the `bm25s` package (docs/testbed.md, The shop task).

WebShop searches its products with Pyserini's BM25 (a Lucene index); `bm25s` implements the
same Lucene variant of BM25 in numpy (Lucene drops the constant (k1 + 1) factor):

    score(q, d) = sum_{t in q} idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

Ties (equal scores) are broken by product order, so a query always returns the same list.
"""
from __future__ import annotations

import functools

import bm25s
import numpy as np

from .shop_catalogue import Product, cached_catalogue


class ShopSearch:
    def __init__(self, products: tuple[Product, ...]):
        self.products = products
        self.retriever = bm25s.BM25()  # Lucene BM25, k1=1.5, b=0.75
        tokens = bm25s.tokenize([p.search_text for p in products], stopwords="en", show_progress=False)
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int = 15) -> list[Product]:
        """The top-k products for `query` (score > 0 only), best first; [] when nothing matches."""
        words = [w for w in _words(bm25s.tokenize([query], stopwords="en", show_progress=False))
                 if w in self.retriever.vocab_dict]  # words outside the index score 0
        if not words:
            return []
        scores = self.retriever.get_scores(words)  # [N]
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]  # [k] by score desc, then product order
        return [self.products[i] for i in order if scores[i] > 0]


def _words(tokens) -> list[str]:
    """The query's words back from bm25s' (ids, vocab) form."""
    inverse = {i: w for w, i in tokens.vocab.items()}
    return [inverse[i] for i in tokens.ids[0]]


@functools.lru_cache(maxsize=4)
def cached_search(n_products: int, seed: int) -> ShopSearch:
    """One index per catalogue and process (building it takes ~0.1 s for 3000 products)."""
    return ShopSearch(cached_catalogue(n_products, seed))
