"""Tool-integrated reasoning (TIR) math: the agent may run Python before it answers.

Actions (after projection; the prefix is case-insensitive):
- `python: CODE` runs CODE in the sandbox (arena.envs.sandbox, mode `sandbox_mode`: auto,
  namespaces or plain; docs/sandbox.md, Modes); its stdout, or the error, truncated, is the
  next observation; reward 0.
- `answer: VALUE` ends the episode: reward 1 and won if VALUE equals the gold answer, else 0.
- anything else is a no-op turn with a short error observation.
The episode is cut after `max_turns` steps. Answers are compared exactly first (integers,
decimals, fractions, \\frac, "x = .." lists); only a text the exact parser cannot read goes to
math_verify (imported lazily: its first import costs about 0.5 s).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from . import sandbox
from .base import EnvUnavailableError
from .math_problems import LEVELS, Problem, generate, load_problems
from .spec import AT_LEAST_ONE, POSITIVE, EnvSpec

PREFIXES = ("python:", "answer:")
MAX_ANSWER_CHARS = 200  # longer answers are wrong without parsing (bounds math_verify's work)
_FENCE = re.compile(r"^```[a-zA-Z]*\n?|\n?```$")
_ASSIGN = re.compile(r"^\s*([a-zA-Z]\w*)\s*=\s*(.+)$")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+")
_FRAC = re.compile(r"^\\d?frac\{([^{}]+)\}\{([^{}]+)\}$")


def _number(text: str) -> Optional[Fraction]:
    """Exact value of "42", "-0.75", "3/4", "-\\frac{3}{4}", "1,000" (None if not a number)."""
    text = text.strip().strip("$").strip().rstrip(".").replace(" ", "")
    sign = -1 if text.startswith("-") and text[1:2] == "\\" else 1
    match = _FRAC.match(text.lstrip("-") if sign < 0 else text)
    if match:
        num, den = _number(match.group(1)), _number(match.group(2))
        return None if num is None or not den else sign * num / den
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    try:
        return Fraction(text)  # accepts "3", "-0.75", "3/4", "1e3"
    except (ValueError, ZeroDivisionError):
        return None


def exact_answer(text: str) -> Optional[tuple]:
    """Normalised answer: (("", value),) for one value, or sorted ((name, value), ...) for
    "x = 2, y = -1", or (("#0", v0), ("#1", v1)) for "(2, -1)"; None when not parseable."""
    text = text.strip().strip("$").strip()
    boxed = re.fullmatch(r"\\boxed\{(.*)\}", text)
    text = boxed.group(1) if boxed else text
    if _THOUSANDS.fullmatch(text):  # "1,000" is one number, not a pair
        return (("", _number(text)),)
    parts = [p for p in re.split(r",\s*|;\s*|\s+and\s+", text.strip("()")) if p.strip()]
    if not parts:
        return None
    if len(parts) == 1:
        match = _ASSIGN.match(parts[0])  # "x = 5" counts as 5
        value = _number(match.group(2) if match else parts[0])
        return None if value is None else (("", value),)
    named = [_ASSIGN.match(p) for p in parts]
    if all(named):
        values = [(m.group(1), _number(m.group(2))) for m in named]
        return None if any(v is None for _, v in values) else tuple(sorted(values))
    values = [_number(p) for p in parts]
    return None if any(v is None for v in values) else tuple((f"#{i}", v) for i, v in enumerate(values))


def _positional(answer: tuple) -> tuple:
    """Drop the names ((x, 2), (y, -1)) -> (2, -1), ordered by name."""
    return tuple(value for _, value in answer)


def answers_match(gold: str, predicted: str) -> bool:
    """Exact/normalised comparison first; math_verify only for texts it cannot read."""
    if len(predicted) > MAX_ANSWER_CHARS:
        return False
    gold_exact, pred_exact = exact_answer(gold), exact_answer(predicted)
    if gold_exact is not None and pred_exact is not None:
        return gold_exact == pred_exact or (
            len(gold_exact) > 1 and _positional(gold_exact) == _positional(pred_exact)
            and all(name.startswith("#") for name, _ in pred_exact))
    return _math_verify(gold, predicted)


def _math_verify(gold: str, predicted: str) -> bool:
    try:
        from math_verify import parse, verify

        # math_verify's timeouts use SIGALRM, which only works in the main thread
        seconds = 5 if threading.current_thread() is threading.main_thread() else None
        # a bare LaTeX answer ("\sqrt{2}/2") is only found inside $..$: try both readings
        gold_parsed = parse(f"${gold.strip('$')}$", parsing_timeout=seconds)
        pred_parsed = (parse(predicted, parsing_timeout=seconds)
                       or parse(f"${predicted.strip('$')}$", parsing_timeout=seconds))
        return bool(gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=seconds))
    except Exception:  # noqa: BLE001 (a verifier failure is a wrong answer, never a crash)
        return False


def _code_of(action_body: str) -> str:
    """The code after `python:`, without a surrounding markdown fence."""
    return _FENCE.sub("", action_body.strip()).strip("\n")


@dataclass(frozen=True)
class TirMathKwargs:
    """env.kwargs of tir_math (arena.envs.spec): the one place for their defaults."""
    level: str = "easy"  # math_problems.LEVELS
    max_turns: int = field(default=4, metadata=AT_LEAST_ONE)
    problems_path: Optional[str] = None  # a JSONL of problems instead of generated ones
    sandbox_timeout: float = field(default=5.0, metadata=POSITIVE)  # seconds per tool call
    sandbox_mode: str = "auto"  # sandbox.MODES
    output_chars: int = field(default=400, metadata=AT_LEAST_ONE)  # tool output shown, at most
    expert_uses_tool: bool = True


def check_available(kw: TirMathKwargs) -> None:
    """EnvUnavailableError with the sandbox's own message when tool code cannot be isolated here
    in `sandbox_mode` (arena.envs.check_available): `arena train/bc/sweep` exit 2 before any
    work instead of failing at the first tool call. Probes the sandbox once per process."""
    if kw.sandbox_mode not in sandbox.MODES:
        raise EnvUnavailableError(f"unknown sandbox_mode {kw.sandbox_mode!r}; valid: {', '.join(sandbox.MODES)}")
    try:
        sandbox.mode_in_force(kw.sandbox_mode)
    except sandbox.SandboxUnavailable as exc:
        raise EnvUnavailableError(str(exc)) from exc


class TirMathEnv:
    name = "tir_math"

    def __init__(self, **kwargs: Any):
        kw = TirMathKwargs(**kwargs)  # the defaults: TirMathKwargs
        if kw.level not in LEVELS:
            raise ValueError(f"unknown level {kw.level!r}; valid: {', '.join(LEVELS)}")
        if kw.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {kw.max_turns}")
        if kw.sandbox_mode not in sandbox.MODES:
            raise ValueError(f"unknown sandbox_mode {kw.sandbox_mode!r}; valid: {', '.join(sandbox.MODES)}")
        self.level, self.max_turns = kw.level, int(kw.max_turns)
        self.problems = load_problems(kw.problems_path) if kw.problems_path else None
        self.sandbox_timeout, self.sandbox_mode = float(kw.sandbox_timeout), kw.sandbox_mode
        self.output_chars, self.expert_uses_tool = int(kw.output_chars), bool(kw.expert_uses_tool)
        self.instruction = (
            "You are solving a math problem and may use a Python interpreter. Each turn, take "
            "exactly one action: `python: CODE` runs CODE (only what it prints is returned to "
            "you), or `answer: VALUE` submits your final answer (integers or reduced fractions "
            "such as -7/5; for systems `x = .., y = ..`) and ends the episode. You have "
            f"{self.max_turns} turns; a correct answer scores 1.")
        self.problem: Optional[Problem] = None
        self.turn, self.tool_calls, self.done, self.won = 0, 0, True, False

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        if self.problems is not None:
            self.problem = self.problems[int(seed) % len(self.problems)]
        else:
            self.problem = generate(self.level, int(seed))
        self.turn, self.tool_calls, self.done, self.won = 0, 0, False, False
        return self._observation(""), self._info()

    def is_admissible(self, action: str) -> bool:
        return action.strip().lower().startswith(PREFIXES)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.problem is None:
            raise RuntimeError("TirMathEnv.step called before reset")
        if self.done:
            return self._observation("The episode is over."), 0.0, True, self._info()
        self.turn += 1
        text, reward = str(action).strip(), 0.0
        head = text[:7].lower()
        if head == "answer:":
            self.won = answers_match(self.problem.answer, text[7:].strip())
            self.done, reward = True, float(self.won)
            feedback = "Correct." if self.won else "Wrong answer."
        elif head == "python:":
            self.tool_calls += 1
            feedback = self._run(_code_of(text[7:]))
        else:
            feedback = "Invalid action: use `python: CODE` or `answer: VALUE`."
        if self.turn >= self.max_turns and not self.done:
            self.done = True
            feedback += "\nNo turns left."
        return self._observation(feedback), reward, self.done, self._info()

    def _run(self, code: str) -> str:
        result = sandbox.run_code(code, timeout=self.sandbox_timeout, mode=self.sandbox_mode,
                                  output_chars=max(4000, self.output_chars))
        if result.timed_out:
            return f"Python error: timed out after {self.sandbox_timeout:g} s."
        if result.returncode != 0:
            # the end of a traceback names the error: keep the tail
            error = result.stderr.strip() or f"exit status {result.returncode}"
            return "Python error:\n" + error[-self.output_chars:]
        output = result.stdout[: self.output_chars]
        return "Python output:\n" + output if output.strip() else "Python output: (nothing printed)"

    def expert_action(self) -> Optional[str]:
        """Scripted expert: one tool call running the problem's own program (when it has one,
        tools are enabled and a turn is left to answer after it), then the gold answer."""
        if self.done or self.problem is None:
            return None
        turns_left = self.max_turns - self.turn
        if self.expert_uses_tool and self.problem.tool_code and self.tool_calls == 0 and turns_left >= 2:
            return f"python: {self.problem.tool_code}"
        return f"answer: {self.problem.answer}"

    def _observation(self, feedback: str) -> str:
        parts = [f"Problem: {self.problem.question}"]
        if feedback:
            parts.append(feedback)
        if not self.done:
            parts.append(f"Turns left: {self.max_turns - self.turn}.")
        return "\n".join(parts)

    def _info(self) -> dict[str, Any]:
        return {"won": self.won, "turn": self.turn, "tool_calls": self.tool_calls}


SPEC = EnvSpec(name="tir_math", kwargs=TirMathKwargs, factory=TirMathEnv, check_available=check_available)
