"""The name transformers gives the KV cache: the keyword of a model's, a decoder layer's and
`create_causal_mask`'s forward, and the field of the model's output. It is `past_key_values` up
to transformers 5.23 and `cache` from 5.24 on, where `past_key_values` still works but warns on
every call ("will be removed in version 5.40.0"). arena passes the name the installed version
wants; pyproject.toml bounds transformers below 5.40, the release the old name is to be removed
in (a newer one is taken only after the tests run on it)."""
from __future__ import annotations

import re
from typing import Any

import transformers

CACHE_RENAMED_IN = (5, 24)  # the first release that names it `cache`


def _release(version: str) -> tuple[int, int]:
    major, minor = (int(x) for x in re.findall(r"\d+", version)[:2])
    return major, minor


CACHE_KWARG = "cache" if _release(transformers.__version__) >= CACHE_RENAMED_IN else "past_key_values"


def cache_kwargs(cache: Any) -> dict[str, Any]:
    """{name: cache}, for `model(...)`, a decoder layer or `create_causal_mask`."""
    return {CACHE_KWARG: cache}


def output_cache(out: Any) -> Any:
    """The cache a model's forward returned (`out.cache`, or `out.past_key_values` before 5.24)."""
    return getattr(out, CACHE_KWARG)
