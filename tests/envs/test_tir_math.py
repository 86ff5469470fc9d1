"""TIR math environment: seeds, hand-worked episodes, answer checking, expert, problem files."""
from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from arena.envs import Env, make
from arena.envs.math_problems import LEVELS, generate, load_problems
from arena.envs.tir_math import TirMathEnv, answers_match, exact_answer


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def one_problem_file(tmp_path):
    return write_jsonl(tmp_path / "p.jsonl", [{"question": "What is 17 * 3?", "answer": 51}])


# ---- generated problems -------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_seed_decides_the_problem(level):
    first, again = TirMathEnv(level=level), TirMathEnv(level=level)
    assert [first.reset(s)[0] for s in range(20)] == [again.reset(s)[0] for s in range(20)]
    assert len({first.reset(s)[0] for s in range(50)}) >= 40  # seeds give varied problems


def _python(expr: str) -> str:
    """Python source for a question's expression: integers -> Fraction, '3x' -> '3*x'."""
    expr = re.sub(r"\d+", lambda m: f"Fraction({m.group()})", expr)
    return re.sub(r"\)([xy])", r")*\1", expr)


def _satisfies(question: str, answer: str) -> bool:
    """Check the gold answer against the question text itself (independent of the generator):
    evaluate "Compute E." exactly, or substitute x (and y) into each equation."""
    if question.startswith("Compute "):
        expr = question[len("Compute "):].split(". Give")[0].rstrip(".")
        return eval(_python(expr), {"Fraction": Fraction}) == Fraction(answer)
    if question.startswith("Solve for x: "):
        equations = [question[len("Solve for x: "):].split(". Give")[0]]
        values = {"x": Fraction(answer)}
    else:
        equations = question[len("Solve the system "):].split(". Answer")[0].split(" and ")
        values = {name: Fraction(v) for name, v in re.findall(r"([xy]) = (-?\d+)", answer)}
    assert equations and values, question
    scope = {"Fraction": Fraction, **values}
    return all(eval(_python(left), scope) == eval(_python(right), scope)
               for left, right in (eq.split(" = ") for eq in equations))


@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
def test_gold_answers_solve_the_question(level):
    for seed in range(150):
        problem = generate(level, seed)
        assert _satisfies(problem.question, problem.answer), problem


def test_levels_have_their_kinds():
    assert all(len(re.findall(r"\d+", generate("easy", s).question)) == 2 for s in range(50))
    assert all("(" in generate("medium", s).question for s in range(50))
    hard = [generate("hard", s).question for s in range(60)]
    assert any(q.startswith("Solve for x: ") for q in hard)
    assert any(q.startswith("Solve the system ") for q in hard)
    assert any(q.startswith("Compute ") and "/" in q for q in hard)


# ---- hand-worked episodes -----------------------------------------------------------------

def test_python_output_is_the_next_observation_then_right_answer_wins(one_problem_file):
    env = TirMathEnv(problems_path=one_problem_file)
    obs, info = env.reset(0)
    assert obs == "Problem: What is 17 * 3?\nTurns left: 4." and info["won"] is False
    obs, reward, done, info = env.step("python: print(17 * 3)")  # 17 * 3 = 51
    assert obs == "Problem: What is 17 * 3?\nPython output:\n51\n\nTurns left: 3."
    assert (reward, done, info["won"], info["tool_calls"]) == (0.0, False, False, 1)
    obs, reward, done, info = env.step("Answer: 51")
    assert (reward, done, info["won"], info["turn"]) == (1.0, True, True, 2)
    assert env.expert_action() is None


def test_wrong_answer_ends_with_zero(one_problem_file):
    env = TirMathEnv(problems_path=one_problem_file)
    env.reset(0)
    obs, reward, done, info = env.step("answer: 52")
    assert (reward, done, info["won"]) == (0.0, True, False) and "Wrong answer." in obs
    # further steps are no-ops on a finished episode
    assert env.step("answer: 51")[1:3] == (0.0, True)


def test_malformed_action_is_a_noop_and_max_turns_cuts(one_problem_file):
    env = TirMathEnv(problems_path=one_problem_file, max_turns=2)
    env.reset(0)
    obs, reward, done, info = env.step("I think it is 51")
    assert (reward, done, info["won"], info["turn"]) == (0.0, False, False, 1)
    assert "Invalid action" in obs and obs.endswith("Turns left: 1.")
    obs, reward, done, info = env.step("python: print('still thinking')")
    assert (reward, done, info["won"]) == (0.0, True, False) and obs.endswith("No turns left.")


def test_python_errors_timeouts_and_fences(one_problem_file):
    env = TirMathEnv(problems_path=one_problem_file, sandbox_timeout=1.0, max_turns=10)
    env.reset(0)
    obs = env.step("python: 1/0")[0]
    assert "Python error:" in obs and obs.count("ZeroDivisionError: division by zero") == 1
    assert "timed out after 1 s" in env.step("python: while True: pass")[0]
    assert "Python output:\n2\n" in env.step("python: ```python\nprint(1 + 1)\n```")[0]
    assert "(nothing printed)" in env.step("python: x = 3")[0]
    long_output = env.step("python: print('a' * 5000)")[0]
    assert "a" * 400 in long_output and "a" * 401 not in long_output  # output_chars=400


def test_is_admissible():
    env = TirMathEnv()
    for ok in ("python: print(1)", "  PYTHON:print(1)", "answer: 3", "Answer:3/4"):
        assert env.is_admissible(ok), ok
    for bad in ("print(1)", "the answer: 3", "py: 1", "", "answer 3"):
        assert not env.is_admissible(bad), bad


def test_registry_and_bad_arguments():
    env = make("tir_math", level="medium")
    assert isinstance(env, Env) and env.name == "tir_math" and env.max_turns == 4
    with pytest.raises(ValueError, match="easy, medium, hard, mixed"):
        TirMathEnv(level="impossible")


# ---- answer checking ----------------------------------------------------------------------

@pytest.mark.parametrize("gold, predicted, expected", [
    ("51", "51", True),
    ("51", " 51. ", True),
    ("51", "x = 51", True),
    ("51", "\\boxed{51}", True),
    ("1000", "1,000", True),
    ("-7/5", "-1.4", True),            # -7/5 = -1.4 exactly
    ("-7/5", "\\frac{-7}{5}", True),
    ("-7/5", "-\\dfrac{14}{10}", True),  # 14/10 reduces to 7/5
    ("-7/5", "-1.40001", False),
    ("x = 2, y = -1", "y = -1, x = 2", True),
    ("x = 2, y = -1", "(2, -1)", True),   # positional: x first
    ("x = 2, y = -1", "(-1, 2)", False),
    ("x = 2, y = -1", "x = 2", False),
    ("2", "\\sqrt{4}", True),             # not exact-parseable: math_verify decides
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", True),
    ("51", "fifty-one", False),
    ("51", "", False),
    ("51", "5" * 300, False),             # over MAX_ANSWER_CHARS
])
def test_answers_match(gold, predicted, expected):
    assert answers_match(gold, predicted) is expected


def test_exact_answer_normal_forms():
    assert exact_answer("-\\frac{3}{4}") == (("", Fraction(-3, 4)),)
    assert exact_answer("y=-1 and x=2") == (("x", Fraction(2)), ("y", Fraction(-1)))
    assert exact_answer("hello") is None and exact_answer("") is None


# ---- the scripted expert ------------------------------------------------------------------

def run_expert(env: TirMathEnv, seed: int) -> tuple[bool, list[str]]:
    env.reset(seed)
    actions, done, info = [], False, {}
    while not done:
        actions.append(env.expert_action())
        _, _, done, info = env.step(actions[-1])
    return info["won"], actions


def test_expert_direct_wins_200_seeds():
    env = TirMathEnv(expert_uses_tool=False)  # default level; answers without a process per seed
    wins = sum(run_expert(env, seed)[0] for seed in range(200))
    assert wins >= 198  # >= 99%


@pytest.mark.parametrize("level", LEVELS)
def test_expert_tool_path(level):
    env = TirMathEnv(level=level)
    for seed in range(2):
        env.reset(seed)
        first = env.expert_action()
        assert first.startswith("python: ")
        obs = env.step(first)[0]
        assert f"Python output:\n{env.problem.answer}\n" in obs  # the tool prints the gold
        second = env.expert_action()
        assert second == f"answer: {env.problem.answer}"
        assert env.step(second)[1:3] == (1.0, True)


def test_expert_answers_directly_with_one_turn():
    won, actions = run_expert(TirMathEnv(max_turns=1), 3)
    assert won and len(actions) == 1 and actions[0].startswith("answer: ")


# ---- user problem files -------------------------------------------------------------------

ROWS = [{"question": "What is 2 + 2?", "answer": "4"},
        {"question": "Half of 3?", "answer": "3/2"},
        {"question": "Root of 2 over 2?", "answer": "\\frac{\\sqrt{2}}{2}"}]


def _check_file(path):
    env = TirMathEnv(problems_path=path)
    # seed i -> problem i mod 3
    for seed, row in [(0, ROWS[0]), (1, ROWS[1]), (5, ROWS[2]), (1_000_001, ROWS[2])]:
        assert env.reset(seed)[0].startswith(f"Problem: {row['question']}\n")
        won, actions = run_expert(env, seed)
        assert won and actions == [f"answer: {row['answer']}"]  # no tool code for user problems
    env.reset(1)
    assert env.step("answer: 1.5")[1] == 1.0


def test_problem_file_jsonl(tmp_path):
    _check_file(write_jsonl(tmp_path / "mine.jsonl", ROWS))


def test_problem_file_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = str(tmp_path / "mine.parquet")
    pd.DataFrame(ROWS).to_parquet(path)
    _check_file(path)


def test_problem_file_errors(tmp_path):
    with pytest.raises(ValueError, match="answer, question"):
        load_problems(write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "solution": "1"}]))
    with pytest.raises(ValueError, match=".jsonl, .parquet"):
        load_problems(str(tmp_path / "p.csv"))


# ---- reply length against the env config ---------------------------------------------------

def test_expert_replies_fit_max_new_tokens_except_hard_systems():
    """configs/env/tir_math.yaml's max_new_tokens holds every expert reply of levels easy and
    medium and hard's equations and fraction sums, but not hard's 2x2 systems (Cramer's rule,
    ~90 tokens): a policy that copies the expert is cut before `</action>` there and never wins
    them, which caps level=hard at the share of other problems (docs/testbed.md, "TIR math")."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from arena.bc.train import expert_response
    from arena.lm.tokenizer import build_tokenizer

    limit = OmegaConf.load(Path(__file__).resolve().parents[2] / "configs/env/tir_math.yaml").max_new_tokens
    replies = {level: [] for level in ("easy", "medium", "hard")}
    for level, found in replies.items():
        for seed in range(150):
            problem = generate(level, seed)
            found.append((problem.question, expert_response(f"python: {problem.tool_code}")))
            found.append((problem.question, expert_response(f"answer: {problem.answer}")))
    tokenizer = build_tokenizer([r for found in replies.values() for _, r in found], kind="wordlevel")

    def length(reply: str) -> int:
        return len(tokenizer.encode(reply, add_special_tokens=False))

    # By hand: <think> plan </think> <action> python : " print" ( 2 3 " +" " 4" 5 ) </action> = 15
    assert length(expert_response("python: print(23 + 45)")) == 15
    for level in ("easy", "medium"):
        assert max(length(r) for _, r in replies[level]) <= limit, level
    hard = [(q.startswith("Solve the system"), "python:" in r, length(r)) for q, r in replies["hard"]]
    system_calls = [n for system, call, n in hard if system and call]
    assert len(system_calls) >= 30 and min(system_calls) > limit  # ~1/3 of 150 hard problems
    assert max(n for system, call, n in hard if not (system and call)) <= limit  # answers fit
