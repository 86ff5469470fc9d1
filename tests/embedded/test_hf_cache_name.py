"""arena passes the KV cache under the name the installed transformers wants (arena/lm/hf_cache.py):
`past_key_values` before 5.24, `cache` from 5.24 on, where the old name warns on every call
("will be removed in version 5.40.0"). Every cached path (the sampler's HF decoder, the trimmed
and untrimmed last-position logits, the shared-prompt log-probs) runs here with FutureWarning as
an error; and pyproject.toml bounds transformers below 5.40."""
import inspect
import re
import tomllib
import warnings
from pathlib import Path

import pytest
import torch
import transformers

from arena.lm.decoding import HFCacheDecoder, prompt_positions
from arena.lm.hf_cache import CACHE_KWARG, _release
from arena.lm.last_positions import last_logits
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.model import build_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_name_is_the_one_the_installed_models_take():
    model = build_model(50, size="tiny")
    assert CACHE_KWARG in inspect.signature(type(model).forward).parameters
    assert CACHE_KWARG in inspect.signature(type(model.model.layers[0]).forward).parameters
    assert CACHE_KWARG == ("cache" if _release(transformers.__version__) >= (5, 24) else "past_key_values")
    assert _release("5.24.0") == (5, 24) and _release("5.3.0.dev0") == (5, 3) and _release("4.57.6") == (4, 57)


def test_no_cached_path_passes_a_deprecated_name():
    model = build_model(50, size="tiny").eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 50, (3, 6), generator=g)  # [3, 6]
    mask = torch.ones(3, 6, dtype=torch.long)  # [3, 6]
    mask[1, :2] = 0  # left padding in one row
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with torch.no_grad():
            decoder = HFCacheDecoder(model)
            decoder.prefill(ids, mask)  # [3, V]
            decoder.step(torch.tensor([1, 2, 3]), prompt_positions(mask)[:, -1] + 1)  # [3, V]
            for trim in (True, False):
                last_logits(model, ids, mask, prompt_positions(mask), 1, use_cache=True, trim=trim)  # [3, 1, V]
        response = torch.randint(1, 50, (6, 4), generator=g)  # [6, 4]: two rows per prompt
        token_logprobs_and_entropy(model, ids.repeat(2, 1), mask.repeat(2, 1), response,
                                   torch.ones(6, 4, dtype=torch.long), share_prompts=True)  # 3 prompts, one cache


def test_transformers_is_bounded_below_the_release_that_drops_the_old_name():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    [spec] = [d for d in pyproject["project"]["dependencies"] if re.match(r"transformers\b", d)]
    assert re.fullmatch(r"transformers>=4\.51,<5\.40", spec.replace(" ", "")), spec
