"""Math problems for the TIR environment: procedurally generated (exact answers) or loaded
from a user's file.

Levels (the seed decides the problem through `random.Random(seed)`):
- easy: two-operand integer arithmetic (+, -, *, exact /);
- medium: three or four integer operands with parentheses (exact divisions only);
- hard: a linear equation in x (rational answer), a sum of fractions, or a 2x2 linear system
  with an integer solution (answer "x = .., y = ..");
- mixed: the seed also picks one of the three.
Every generated problem carries `tool_code`, a Python program that prints the exact answer
(used by the scripted expert's tool call).
"""
from __future__ import annotations

import json
import operator
import os
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

LEVELS = ("easy", "medium", "hard", "mixed")
FILE_FORMATS = (".jsonl", ".parquet")


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str  # the gold answer text ("42", "-7/5", "x = 2, y = -1", or a user's answer)
    tool_code: Optional[str] = None  # Python that prints the answer (None for user problems)


def generate(level: str, seed: int) -> Problem:
    """The problem for (level, seed); the same pair always gives the same problem."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; valid: {', '.join(LEVELS)}")
    rng = random.Random(seed)
    if level == "mixed":
        level = rng.choice(LEVELS[:3])
    if level == "easy":
        return _binary(rng)
    if level == "medium":
        return _nested(rng)
    return rng.choice((_linear_equation, _fraction_sum, _linear_system))(rng)


def _binary(rng: random.Random) -> Problem:
    op = rng.choice("+-*/")
    if op in "+-":
        a, b = rng.randint(1, 99), rng.randint(1, 99)
    elif op == "*":
        a, b = rng.randint(2, 30), rng.randint(2, 20)
    else:  # exact division: a = b * q
        b, q = rng.randint(2, 12), rng.randint(1, 20)
        a = b * q
    return _arithmetic(f"{a} {op} {b}")


def _arithmetic(text: str) -> Problem:
    """A problem asking for the value of an integer expression whose divisions are exact."""
    value = _evaluate(text)
    assert value.denominator == 1, text
    # the tool code uses floor division, which equals "/" because every division is exact
    return Problem(f"Compute {text}.", str(value), f"print({text.replace('/', '//')})")


def _evaluate(text: str) -> Fraction:
    """Exact value of an expression of integers, + - * / and parentheses."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    # wrap each integer literal in Fraction(...) and evaluate with no builtins
    code = " ".join(f"F({t})" if t.isdigit() else t for t in tokens)
    return eval(code, {"__builtins__": {}, "F": Fraction})  # noqa: S307 (our own text)


# operator precedence for parenthesisation: + - bind weaker than * /; a leaf binds tightest
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_LEAF = 3
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _tree(rng: random.Random, leaves: int) -> tuple[str, Fraction, int]:
    """(text, exact value, precedence) of a random expression with `leaves` integer leaves."""
    if leaves == 1:
        n = rng.randint(1, 20)
        return str(n), Fraction(n), _LEAF
    split = rng.randint(1, leaves - 1)
    left, right = _tree(rng, split), _tree(rng, leaves - split)
    op = rng.choice("+-*/")
    if op == "/" and (right[1] == 0 or (left[1] / right[1]).denominator != 1):
        op = rng.choice("+-*")  # keep every division exact
    value = _APPLY[op](left[1], right[1])
    prec = _PRECEDENCE[op]
    # the right operand of - and / needs parentheses at equal precedence (a - (b - c))
    left_text = f"({left[0]})" if left[2] < prec else left[0]
    right_text = f"({right[0]})" if right[2] < prec or (right[2] == prec and op in "-/") else right[0]
    return f"{left_text} {op} {right_text}", value, prec


def _nested(rng: random.Random) -> Problem:
    while True:
        text, value, _ = _tree(rng, rng.randint(3, 4))
        if "(" in text and abs(value) <= 10_000:
            return _arithmetic(text)


def _linear(terms: list[tuple[int, str]]) -> str:
    """Render sum(coef * var) with signs: [(3, "x"), (-1, "y"), (7, "")] -> "3x - y + 7"."""
    out = ""
    for coef, var in terms:
        if coef == 0:
            continue
        magnitude = "" if abs(coef) == 1 and var else str(abs(coef))
        if not out:
            out = ("-" if coef < 0 else "") + magnitude + var
        else:
            out += (" - " if coef < 0 else " + ") + magnitude + var
    return out or "0"


def _nonzero(rng: random.Random, low: int, high: int) -> int:
    return rng.choice([n for n in range(low, high + 1) if n != 0])


def _linear_equation(rng: random.Random) -> Problem:
    # a x + b = c x + d  =>  x = (d - b) / (a - c), with a != c
    a, c = _nonzero(rng, -9, 9), rng.randint(-9, 9)
    while c == a:
        c = rng.randint(-9, 9)
    b, d = rng.randint(-20, 20), rng.randint(-20, 20)
    x = Fraction(d - b, a - c)
    question = (f"Solve for x: {_linear([(a, 'x'), (b, '')])} = {_linear([(c, 'x'), (d, '')])}. "
                "Give x as an integer or a reduced fraction.")
    code = f"from fractions import Fraction\nprint(Fraction({d} - ({b}), {a} - ({c})))"
    return Problem(question, str(x), code)


def _fraction_sum(rng: random.Random) -> Problem:
    parts = [(rng.randint(1, 9), rng.randint(2, 9)) for _ in range(rng.randint(2, 3))]
    signs = ["+"] + [rng.choice("+-") for _ in parts[1:]]
    # value = sum(sign_i * p_i / q_i), exact
    value = sum((Fraction(p, q) * (1 if s == "+" else -1) for s, (p, q) in zip(signs, parts)),
                Fraction(0))
    text = " ".join(f"{s} {p}/{q}" for s, (p, q) in zip(signs, parts))[2:]
    code_terms = " ".join(f"{s} F({p}, {q})" for s, (p, q) in zip(signs, parts))[2:]
    question = f"Compute {text}. Give the result as an integer or a reduced fraction."
    return Problem(question, str(value), f"from fractions import Fraction as F\nprint({code_terms})")


def _linear_system(rng: random.Random) -> Problem:
    # a1 x + b1 y = e1, a2 x + b2 y = e2 with det = a1 b2 - a2 b1 != 0 and integer (x, y)
    x, y = rng.randint(-9, 9), rng.randint(-9, 9)
    while True:
        a1, b1, a2, b2 = (_nonzero(rng, -6, 6) for _ in range(4))
        if a1 * b2 - a2 * b1 != 0:
            break
    e1, e2 = a1 * x + b1 * y, a2 * x + b2 * y
    question = (f"Solve the system {_linear([(a1, 'x'), (b1, 'y')])} = {e1} and "
                f"{_linear([(a2, 'x'), (b2, 'y')])} = {e2}. Answer in the form x = .., y = ..")
    # Cramer's rule: x = (e1 b2 - e2 b1) / det, y = (a1 e2 - a2 e1) / det
    code = (f"from fractions import Fraction as F\ndet = {a1} * {b2} - ({a2}) * ({b1})\n"
            f"x = F({e1} * {b2} - ({e2}) * ({b1}), det)\ny = F({a1} * {e2} - ({a2}) * ({e1}), det)\n"
            "print(f'x = {x}, y = {y}')")
    return Problem(question, f"x = {x}, y = {y}", code)


def load_problems(path: str) -> list[Problem]:
    """Problems from a .jsonl or .parquet file with `question` and `answer` columns."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FILE_FORMATS:
        raise ValueError(f"unsupported problem file {path!r}; valid formats: {', '.join(FILE_FORMATS)}")
    if ext == ".jsonl":
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    else:
        import pandas as pd

        rows = pd.read_parquet(path).to_dict("records")
    if not rows:
        raise ValueError(f"problem file {path!r} holds no problems")
    for i, row in enumerate(rows):
        missing = {"question", "answer"} - set(row)
        if missing:
            raise ValueError(f"problem file {path!r} row {i} lacks {sorted(missing)}; "
                             f"required columns: answer, question (found: {', '.join(sorted(row))})")
    return [Problem(str(row["question"]), str(row["answer"]).strip()) for row in rows]
