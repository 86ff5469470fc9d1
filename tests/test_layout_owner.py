"""The results layout has one owner (arena/runs/layout.py, docs/design.md, Run folder): no other
module of the package spells a run folder's file names. Read with `ast`, so docstrings and
comments may name the files (they explain them); a string constant in code that equals one of
the names is a path built by hand, which would drift from the owner's."""
import ast
from pathlib import Path

from arena.runs import layout

ARENA = Path(__file__).resolve().parents[1] / "arena"
OWNED = {layout.CONFIG_FILE, layout.METRICS_FILE, layout.SUMMARY_FILE, layout.ERROR_FILE, layout.COMMAND_FILE,
         layout.RUN_LOG_FILE, layout.MANIFEST_FILE}
# the same file name for another owner's file, not a run folder's
ELSEWHERE = {("arena/envs/household_games.py", "manifest.json"): "the household pool cache's own manifest"}


def code_strings(tree: ast.AST) -> list[ast.Constant]:
    """String constants that are not docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def test_no_module_but_the_layout_spells_a_run_folder_file_name():
    found = []
    for path in sorted(ARENA.rglob("*.py")):
        rel = path.relative_to(ARENA.parent).as_posix()
        if rel == "arena/runs/layout.py":
            continue
        for node in code_strings(ast.parse(path.read_text())):
            if node.value in OWNED and (rel, node.value) not in ELSEWHERE:
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert found == [], "use the arena.runs.layout constants (or RunFolder) instead: " + ", ".join(found)


def test_the_check_sees_a_literal_and_skips_a_docstring():
    # hand-made case: one docstring naming summary.json (allowed), one code literal (found)
    tree = ast.parse('def f(p):\n    """reads summary.json"""\n    return p / "summary.json"\n')
    assert [n.value for n in code_strings(tree) if n.value in OWNED] == ["summary.json"]
    assert [n.lineno for n in code_strings(tree) if n.value in OWNED] == [3]
