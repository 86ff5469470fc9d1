"""Projection: LLM response text -> (action sent to the env, format_valid, action_valid).

docs/methods.md §3 (the authors' ALFWorld projection) and docs/design.md §D:
- format_valid iff the whole response matches
  `^\\s*<think>(.*?)</think>\\s*<action>(.*?)</action>\\s*$` (case-insensitive, DOTALL),
  each of the four tags appears exactly once, and the text holds no CJK character.
- action_valid = format_valid AND is_admissible(action).
- Malformed output still yields an action that is sent to the environment: the content of
  the first `<action>` tag (up to the next `</action>`, or to the end of the text), else the
  last 30 characters of the raw text.

Deliberate choices (documented, not hidden):
- The action is stripped of surrounding whitespace but NOT lower-cased (the authors lower-case
  for ALFWorld; arena environments decide case-sensitivity in `is_admissible`, and tir_math
  code is case-sensitive).
- "CJK" covers the ranges in `_CJK` below (wider than the authors' U+4E00-U+9FFF): the unified
  ideographs and extension A, compatibility ideographs, kana, hangul syllables, CJK symbols
  and punctuation, and full-width forms.
- `is_admissible` is called only for format-valid responses (it cannot change the result
  otherwise). Exceptions raised by `is_admissible` propagate: they are environment errors,
  which the rollout loop isolates.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

STRICT_FORMAT = re.compile(
    r"^\s*<think>(.*?)</think>\s*<action>(.*?)</action>\s*$", re.IGNORECASE | re.DOTALL
)
_TAGS = re.compile(r"</?(?:think|action)>", re.IGNORECASE)
_ACTION_OPEN = re.compile(r"<action>", re.IGNORECASE)
_ACTION_CLOSE = re.compile(r"</action>", re.IGNORECASE)
_CJK = re.compile(
    "[\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK unified ideographs extension A
    "\u4e00-\u9fff"  # CJK unified ideographs (the authors' range)
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef]"  # half-width and full-width forms
)
FALLBACK_CHARS = 30  # malformed output without <action>: send the last 30 characters


class Projected(NamedTuple):
    action: str  # the text sent to env.step
    format_valid: bool  # strict <think>..</think><action>..</action>, tags once, no CJK
    action_valid: bool  # format_valid AND is_admissible(action)


def extract_action(text: str) -> str:
    """The action to send for any text: first <action> content (to </action> or the end),
    stripped; else the last FALLBACK_CHARS characters of the raw text."""
    opening = _ACTION_OPEN.search(text)
    if opening is None:
        return text[-FALLBACK_CHARS:]
    closing = _ACTION_CLOSE.search(text, opening.end())
    end = closing.start() if closing is not None else len(text)
    return text[opening.end() : end].strip()


def is_format_valid(text: str) -> bool:
    """Each of the four tags exactly once, the strict pattern matches, and no CJK."""
    counts: dict[str, int] = {}
    for tag in _TAGS.findall(text):
        key = tag.lower()
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > 1:
            return False
    if len(counts) != 4:  # some tag is missing
        return False
    # With every tag present once, the lazy groups cannot backtrack far: linear time.
    if STRICT_FORMAT.match(text) is None:
        return False
    return _CJK.search(text) is None


def project(text: str, is_admissible: Callable[[str], bool]) -> Projected:
    """Project one response; never raises for any string (see the module docstring)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    action = extract_action(text)
    format_valid = is_format_valid(text)
    action_valid = bool(format_valid and is_admissible(action))
    return Projected(action, format_valid, action_valid)
