"""Prompt templates: one single user message per turn (docs/methods.md §2).

`render_prompt` is pure. The message holds, in order: the task instruction, the last
`history_length` (observation, action) pairs, "You have already taken N step(s)." (left out on
the first turn, like the authors' no-history template), the current observation, the admissible
actions when the environment lists them, and the required response format
`<think>...</think><action>...</action>`.

Three template kinds:
- "minimal": only what changes between turns (the shown history, the step count, the
  observation, the goal line). The instruction, the action list and the format line are the
  same on every turn of an environment, so they carry no information for a model trained from
  scratch by BC on these prompts (the embedded CPU testbed); they only cost compute.
- "compact" (default): minimal text, because the embedded CPU backend trains a tiny model on
  these prompts and every token costs;
- "full": worded like the authors' prompts (verl-agent style: "Prior to this step, you have
  already taken N step(s). Below are the most recent k observations ...").
The goal of household/alfworld episodes is stated only in the first observation; the rollout
passes it as `task` so it stays in the prompt after that observation leaves the history window.

Both keep the phrase "you have already taken N step(s)" so that the turn index can be recovered
from the text the way the authors' EMPG does (§4.3), although arena takes it from `turn_idx`.

Environment names without a template (e.g. a new environment) use the generic one, which
relies only on `env.instruction`.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

TEMPLATE_KINDS = ("minimal", "compact", "full")


class EnvText(NamedTuple):
    role: str  # full template: who the agent is (used when the env gives no instruction)
    obs_label: str  # compact template: what the observation is called
    action_hint: str  # full template: what goes inside <action>


ENV_TEXT = {
    "sokoban": EnvText(
        "You are an expert agent playing Sokoban.",
        "Board",
        "one of up, down, left, right",
    ),
    "tir_math": EnvText(
        "You are a math problem solver that may run Python code.",
        "State",
        "your next step as the task describes",
    ),
    "household": EnvText(
        "You are an expert agent operating in a household text environment.",
        "Observation",
        "one admissible action",
    ),
    "shop": EnvText(
        "You are an expert agent shopping on a web store.",
        "Page",
        "one search[query] or click[button] action",
    ),
    "alfworld": EnvText(
        "You are an expert agent operating in the ALFRED Embodied Environment.",
        "Observation",
        "one admissible action",
    ),
}
GENERIC_TEXT = EnvText("You are an expert agent.", "Observation", "your next action")

COMPACT_FORMAT = "Reply as <think>...</think><action>...</action>"
FULL_FORMAT = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process "
    "MUST be enclosed within <think> </think> tags.\n"
    "Once you've finished your reasoning, you should choose {hint} for the current step and "
    "present it within <action> </action> tags."
)


TASK_MARKER = "Your task is to: "


def task_from_obs(obs: str) -> str:
    """The goal stated in an observation after "Your task is to: " (household, alfworld; as the
    authors' ALFWorld manager extracts it), or "" when there is none."""
    start = obs.find(TASK_MARKER)
    return obs[start + len(TASK_MARKER) :].strip() if start >= 0 else ""


def render_prompt(
    env_name: str,
    instruction: str,
    obs: str,
    history: Sequence[tuple[str, str]],
    step: int,
    admissible: Optional[Sequence[str]] = None,
    *,
    task: str = "",
    history_length: int = 2,
    template: str = "compact",
) -> str:
    """The user message for one turn.

    history: every (observation, action) pair so far, oldest first; only the last
    `history_length` are shown. step: the number of steps already taken (the 0-based turn
    index). admissible: the legal actions, or None/empty when the environment has no list.
    task: the episode's goal when it is stated only in the first observation (household,
    alfworld: "Your task is to: ..."); shown as its own line whenever neither the current
    observation nor a shown history observation already contains it.
    """
    if template not in TEMPLATE_KINDS:
        raise ValueError(f"unknown prompt template {template!r}; valid: {', '.join(TEMPLATE_KINDS)}")
    if history_length < 0:
        raise ValueError(f"history_length must be >= 0, got {history_length}")
    text = ENV_TEXT.get(env_name, GENERIC_TEXT)
    # The shown pairs are the last k = min(history_length, len(history)); pair i (0-based in
    # the full history) is step i + 1, so the shown ones are steps len(history) - k + 1 ..
    shown = list(history[max(0, len(history) - history_length) :]) if history_length else []
    first_number = len(history) - len(shown) + 1
    task = task.strip() if task else ""
    if task and (task in obs or any(task in past_obs for past_obs, _ in shown)):
        task = ""
    instruction = instruction.strip() if instruction else ""
    render = {"minimal": _minimal, "compact": _compact, "full": _full}[template]
    return render(text, instruction, task, obs, shown, first_number, step, admissible)


def _compact(text, instruction, task, obs, shown, first_number, step, admissible) -> str:
    lines = [instruction] if instruction else []
    if task:
        lines.append(f"Task: {task}")
    for number, (past_obs, past_action) in enumerate(shown, start=first_number):
        lines.append(_labelled(f"Step {number}", past_obs) + f"\nAction {number}: {past_action}")
    if step > 0:
        lines.append(f"You have already taken {step} step(s).")
    lines.append(_labelled(text.obs_label, obs))
    if admissible:
        lines.append("Actions: " + ", ".join(admissible))
    lines.append(COMPACT_FORMAT)
    return "\n".join(lines)


def _minimal(text, instruction, task, obs, shown, first_number, step, admissible) -> str:
    lines = [f"Task: {task}"] if task else []
    for number, (past_obs, past_action) in enumerate(shown, start=first_number):
        lines.append(_labelled(f"Step {number}", past_obs) + f"\nAction {number}: {past_action}")
    if step > 0:
        lines.append(f"You have already taken {step} step(s).")
    lines.append(_labelled(text.obs_label, obs))
    return "\n".join(lines)


def _labelled(label: str, value: str) -> str:
    # multi-line values (e.g. a Sokoban board) start on their own line
    return f"{label}:\n{value}" if "\n" in value else f"{label}: {value}"


def _full(text, instruction, task, obs, shown, first_number, step, admissible) -> str:
    # the environments' instructions already open with the agent's role; the template's role
    # sentence stands in only when there is no instruction
    lines = [instruction or text.role]
    if task:
        lines.append(f"Your task is to: {task}")
    if step > 0:
        pairs = " ".join(
            f"[Observation {number}: '{past_obs}', Action {number}: '{past_action}']"
            for number, (past_obs, past_action) in enumerate(shown, start=first_number)
        )
        lines.append(
            f"Prior to this step, you have already taken {step} step(s). Below are the most "
            f"recent {len(shown)} observations and the corresponding actions you took: {pairs}"
        )
        lines.append(f"You are now at step {step + 1} and your current observation is: {obs}")
    else:
        lines.append(f"Your current observation is: {obs}")
    if admissible:
        quoted = ", ".join(f"'{a}'" for a in admissible)
        lines.append(f"Your admissible actions of the current situation are: [{quoted}].")
    lines.append("")
    lines.append(FULL_FORMAT.format(hint=text.action_hint))
    return "\n".join(lines)
