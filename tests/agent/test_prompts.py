"""Prompt templates: content, history window, step phrase, admissible list, purity."""
import re

import pytest

from arena.agent.prompts import ENV_TEXT, TEMPLATE_KINDS, render_prompt, task_from_obs

HISTORY = [("room A", "go north"), ("room B", "go east"), ("room C", "look")]
EMPG_STEP = re.compile(r"you have already taken (\d+) step\(s\)", re.IGNORECASE)  # docs/methods.md §4.3


def test_compact_first_turn_exact():
    text = render_prompt("household", "Put a mug in the sink.", "You see a mug.", [], 0, ["take mug", "look"])
    assert text == (
        "Put a mug in the sink.\n"
        "Observation: You see a mug.\n"
        "Actions: take mug, look\n"
        "Reply as <think>...</think><action>...</action>"
    )


def test_compact_with_history_exact():
    # step 3, history_length 2 -> the last two pairs, numbered 2 and 3
    text = render_prompt("household", "Task.", "room D", HISTORY, 3, None)
    assert text == (
        "Task.\n"
        "Step 2: room B\nAction 2: go east\n"
        "Step 3: room C\nAction 3: look\n"
        "You have already taken 3 step(s).\n"
        "Observation: room D\n"
        "Reply as <think>...</think><action>...</action>"
    )


def test_multiline_observation_starts_on_its_own_line():
    text = render_prompt("sokoban", "Push.", "#P#\n#_#", [("#_#\n#P#", "up")], 1, ["up"])
    assert "Board:\n#P#\n#_#" in text
    assert "Step 1:\n#_#\n#P#\nAction 1: up" in text


@pytest.mark.parametrize("template", [t for t in TEMPLATE_KINDS if t != "minimal"])
@pytest.mark.parametrize("env_name", sorted(ENV_TEXT) + ["some_new_env"])
def test_every_template_has_the_parts(env_name, template):
    first = render_prompt(env_name, "Do the task.", "OBS0", [], 0, ["a1", "a2"], template=template)
    later = render_prompt(env_name, "Do the task.", "OBS3", HISTORY, 3, ["a1", "a2"], template=template)
    for text in (first, later):
        assert "Do the task." in text
        assert "<think>" in text and "</think>" in text and "<action>" in text and "</action>" in text
        assert "a1" in text and "a2" in text
    assert "OBS0" in first and "OBS3" in later
    # the step phrase is omitted on the first turn and parseable afterwards (EMPG regex)
    assert EMPG_STEP.search(first) is None
    assert EMPG_STEP.search(later).group(1) == "3"
    # history window of 2: room A (step 1) is gone, B and C are shown
    assert "room A" not in later and "room B" in later and "room C" in later
    assert "go east" in later and "look" in later and "go north" not in later


def test_minimal_template_keeps_only_what_changes_between_turns():
    # The constant parts (instruction, action list, format line) are dropped; the history
    # window, the step phrase, the observation and the goal line stay.
    first = render_prompt("sokoban", "Push.", "#P#", [], 0, ["up"], template="minimal")
    assert first == "Board: #P#"
    later = render_prompt("household", "Do the task.", "OBS3", HISTORY, 3, ["a1"], task="put a mug in sink", template="minimal")
    assert "Do the task." not in later and "a1" not in later and "<think>" not in later
    assert later.startswith("Task: put a mug in sink\n")
    assert EMPG_STEP.search(later).group(1) == "3"
    assert "room A" not in later and "room B" in later and "room C" in later and later.endswith("Observation: OBS3")


def test_history_length_controls_window():
    zero = render_prompt("household", "T", "o", HISTORY, 3, None, history_length=0)
    assert "room" not in zero and "You have already taken 3 step(s)." in zero
    all_pairs = render_prompt("household", "T", "o", HISTORY, 3, None, history_length=8)
    assert all(f"Step {i}: room {c}" in all_pairs for i, c in [(1, "A"), (2, "B"), (3, "C")])


def test_no_admissible_list_means_no_actions_line():
    for admissible in (None, []):
        assert "Actions:" not in render_prompt("tir_math", "Solve 1+1.", "start", [], 0, admissible)
        full = render_prompt("tir_math", "Solve 1+1.", "start", [], 0, admissible, template="full")
        assert "admissible actions" not in full


def test_full_template_authors_wording():
    instruction = "You are an expert agent operating in the ALFRED embodied household environment."
    text = render_prompt("alfworld", instruction, "You see a mug.", HISTORY, 3, ["look"],
                         task="put a mug in sink", template="full")
    assert text.startswith(
        "You are an expert agent operating in the ALFRED embodied household environment.\n"
        "Your task is to: put a mug in sink\n"
        "Prior to this step, you have already taken 3 step(s). Below are the most recent 2 observations "
        "and the corresponding actions you took: [Observation 2: 'room B', Action 2: 'go east'] "
        "[Observation 3: 'room C', Action 3: 'look']\n"
        "You are now at step 4 and your current observation is: You see a mug.\n"
        "Your admissible actions of the current situation are: ['look'].\n"
    )


def test_full_template_role_stands_in_without_instruction():
    text = render_prompt("alfworld", "", "You see a mug.", [], 0, None, template="full")
    assert text.startswith(
        "You are an expert agent operating in the ALFRED Embodied Environment.\n"
        "Your current observation is: You see a mug.\n"
    )


def test_task_line_only_when_not_visible():
    first_obs = "A kitchen.\n\nYour task is to: put a mug in the sink."
    assert task_from_obs(first_obs) == "put a mug in the sink."
    assert task_from_obs("A kitchen.") == ""
    task = task_from_obs(first_obs)
    # turn 0: the observation states it -> no extra line
    assert "Task:" not in render_prompt("household", "I", first_obs, [], 0, None, task=task)
    # turn 1: the first observation is in the shown history -> no extra line
    turn1 = render_prompt("household", "I", "A kitchen.", [(first_obs, "look")], 1, None, task=task)
    assert "Task:" not in turn1 and turn1.count("put a mug in the sink.") == 1
    # turn 3 with history_length 2: the first observation left the window -> "Task: ..." line
    history = [(first_obs, "look"), ("A kitchen.", "look"), ("A kitchen.", "look")]
    turn3 = render_prompt("household", "I", "A kitchen.", history, 3, None, task=task)
    assert turn3.startswith("I\nTask: put a mug in the sink.\nStep 2: A kitchen.")


def test_compact_is_shorter_than_full():
    args = ("household", "Put a mug in the sink.", "You see a mug.", HISTORY, 3, ["take mug", "look"])
    assert len(render_prompt(*args)) < len(render_prompt(*args, template="full"))


def test_pure_and_inputs_untouched():
    history = list(HISTORY)
    a = render_prompt("sokoban", "I", "o", history, 3, ["up"])
    b = render_prompt("sokoban", "I", "o", history, 3, ["up"])
    assert a == b and history == HISTORY


def test_unknown_template_lists_choices():
    with pytest.raises(ValueError, match="compact, full"):
        render_prompt("sokoban", "I", "o", [], 0, None, template="verbose")
