"""Projection: strict format, admissibility, fallback action, robustness (docs/methods.md §3)."""
import random

import pytest

from arena.agent.projection import FALLBACK_CHARS, Projected, project

ADMISSIBLE = {"up", "go north", "take mug"}


def admissible(action: str) -> bool:
    return action in ADMISSIBLE


# (text, expected action, format_valid, action_valid); each expectation is read off the rules:
# strict pattern + each tag once + no CJK; action = first <action> content (stripped) up to
# </action> or the end; without <action>, the last 30 raw characters.
CASES = [
    ("<think>push</think><action>up</action>", "up", True, True),
    ("  \n<think>a\nb</think>\n\n<action> go north </action>\n ", "go north", True, True),
    ("<THINK>x</THINK><Action>up</ACTION>", "up", True, True),  # tags are case-insensitive
    ("<think></think><action></action>", "", True, False),  # empty action is not admissible
    ("<think>x</think><action>down</action>", "down", True, False),  # format ok, not admissible
    ("<think>x</think><action>UP</action>", "UP", True, False),  # no lower-casing
    # two actions: the tag count breaks the format; the first action is still sent
    ("<think>x</think><action>up</action><action>go north</action>", "up", False, False),
    # nested action tags
    ("<think>x</think><action><action>up</action></action>", "<action>up", False, False),
    # nested think inside think
    ("<think><think>x</think></think><action>up</action>", "up", False, False),
    # CJK text anywhere makes the format invalid
    ("<think>推箱子</think><action>up</action>", "up", False, False),
    ("<think>x</think><action>up</action>です", "up", False, False),
    ("<think>x</think><action>up</action>\u3002", "up", False, False),  # CJK full stop
    ("", "", False, False),
    ("   ", "   ", False, False),
    ("<action>up</action>", "up", False, False),  # no think
    ("<think>x</think>", "<think>x</think>", False, False),  # no action -> last 30 chars
    ("<think>x</think><action>take mug", "take mug", False, False),  # unclosed action
    ("<think>x<action>up</action>", "up", False, False),  # unclosed think
    ("<think>x</think>junk<action>up</action>", "up", False, False),  # text between the blocks
    ("<action>up</action><think>x</think>", "up", False, False),  # wrong order
    ("<think>x</think><action>up</action> trailing", "up", False, False),  # text after
    ("</action>up<action>take mug</action>", "take mug", False, False),  # close before open
    ("<think>x</think><action>up</action></think>", "up", False, False),  # extra closing tag
    ("<think >x</think><action>up</action>", "up", False, False),  # malformed tag: not a tag
]


@pytest.mark.parametrize("text, action, format_valid, action_valid", CASES)
def test_projection_table(text, action, format_valid, action_valid):
    assert project(text, admissible) == Projected(action, format_valid, action_valid)


def test_fallback_is_last_30_raw_characters():
    text = "I think I should move the box to the left now, so: left please"
    projected = project(text, admissible)
    # no <action> tag: the last 30 characters, unstripped (leading space kept)
    assert projected.action == " the left now, so: left please"
    assert FALLBACK_CHARS == 30 and len(projected.action) == 30
    assert projected.format_valid is False and projected.action_valid is False


def test_is_admissible_not_called_for_invalid_format():
    calls = []
    project("<action>up</action>", lambda a: calls.append(a) or True)
    assert calls == []
    project("<think>t</think><action>up</action>", lambda a: calls.append(a) or True)
    assert calls == ["up"]


def test_non_string_input_does_not_raise():
    assert project(None, admissible) == Projected("", False, False)


FRAGMENTS = [
    "<think>", "</think>", "<action>", "</action>", "<THINK>", "</Action>", "<think", "action>",
    "</", "<", ">", "up", "go north", " ", "\n", "\t", "\x00", "\x1b[0m", "\r", "推", "ア", "한",
    "\ud800", "😀", "é", "\u200b", ".*?", "\\", "(", "$", "^",
]


SAFE_CONTENT = ["up", "go north", " ", "\n", "\t", "\x00", "\x1b[0m", "\r", "😀", "é", "\u200b", ".*?", "\\", "$"]
CJK_CONTENT = ["推", "ア", "한", "\u3002"]


def test_fuzz_never_raises():
    rng = random.Random(1234)
    for _ in range(10_000):
        pieces = [rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 12))]
        if rng.random() < 0.3:
            pieces.append("".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(0, 5))))
        result = project("".join(pieces), admissible)
        assert isinstance(result.action, str)
        assert type(result.format_valid) is bool and type(result.action_valid) is bool
        # action_valid implies format_valid
        assert result.format_valid or not result.action_valid


def test_fuzz_well_formed_skeletons():
    # Random content inside a correct skeleton: valid iff no CJK was inserted; the action is
    # the stripped content of the action block.
    rng = random.Random(99)
    for _ in range(2_000):
        use_cjk = rng.random() < 0.3
        pool = SAFE_CONTENT + (CJK_CONTENT if use_cjk else [])
        think = "".join(rng.choice(pool) for _ in range(rng.randint(0, 6)))
        inner = "".join(rng.choice(pool) for _ in range(rng.randint(0, 4)))
        gap = rng.choice(["", " ", "\n\n"])
        text = f"{gap}<think>{think}</think>{gap}<action>{inner}</action>{gap}"
        has_cjk = any(c in text for c in CJK_CONTENT)
        result = project(text, admissible)
        assert result.format_valid is (not has_cjk)
        assert result.action == inner.strip()
        assert result.action_valid is (not has_cjk and inner.strip() in ADMISSIBLE)


def test_long_response_is_fast():
    # a pathological repeated-tag string must not trigger regex backtracking blow-up
    import time

    text = "<think>" + "</think><action>" * 5000 + "x" * 100_000
    start = time.perf_counter()
    result = project(text, admissible)
    assert time.perf_counter() - start < 0.5
    assert result.format_valid is False
