"""The results layout has one owner (arena/runs/layout.py and its `Results`, docs/design.md, Run
folder): no other module of the package spells a run folder's file names, nor builds a path out
of the layout's folder names. Read with `ast`, so docstrings and comments may name the files and
folders (they explain them).
- A file name (summary.json, bc.json, ...) as a string constant in code is a path built by hand,
  wherever it stands.
- A folder name (evals, bc, runs, ...) is also an ordinary word (a config key, a verb, a
  manifest role), so it counts only where it builds a path: an operand of `/`, an argument of
  Path(...), os.path.join(...), .joinpath(...), .glob(...), .rglob(...), .with_name(...), as a
  whole string or as one '/'-separated part of it, also in an f-string's literal parts."""
import ast
from pathlib import Path

from arena.runs import layout

ARENA = Path(__file__).resolve().parents[1] / "arena"
OWNED = {layout.CONFIG_FILE, layout.METRICS_FILE, layout.SUMMARY_FILE, layout.ERROR_FILE, layout.COMMAND_FILE,
         layout.RUN_LOG_FILE, layout.MANIFEST_FILE, layout.CHOSEN_FILE, layout.BC_REPORT_FILE}
OWNED_DIRS = {layout.EVALS_DIR, layout.BC_DIR, layout.RUNS_DIR, layout.SWEEPS_DIR, layout.CELLS_DIR,
              layout.SEARCH_DIR, layout.REPORT_DIR, layout.CKPT_DIR, layout.STEPS_DIR, layout.POLICY_DIR,
              layout.EVAL_WINS_DIR, layout.JOBS_DIR}
# the same name for another owner's file or folder, not the results layout's
ELSEWHERE = {("arena/envs/household_games.py", "manifest.json"): "the household pool cache's own manifest"}
PATH_CALLS = {"Path", "PurePath", "PosixPath", "joinpath", "glob", "rglob", "with_name"}


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


def _is_path_call(func: ast.expr) -> bool:
    """Path(...), pathlib.Path(...), x.glob(...), ..., and os.path.join(...) (not str.join)."""
    if isinstance(func, ast.Name):
        return func.id in PATH_CALLS
    if isinstance(func, ast.Attribute):
        if func.attr == "join":
            return isinstance(func.value, ast.Attribute) and func.value.attr == "path"
        return func.attr in PATH_CALLS
    return False


def path_operands(tree: ast.AST) -> list[ast.expr]:
    """The expressions that build a path: both sides of every `/`, every argument of a path call."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found += [node.left, node.right]
        elif isinstance(node, ast.Call) and _is_path_call(node.func):
            found += list(node.args)
    return found


def path_folder_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, folder name) of each layout folder name a path is built from by hand."""
    out = []
    for operand in path_operands(tree):
        pieces = operand.values if isinstance(operand, ast.JoinedStr) else [operand]
        for piece in pieces:
            if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                out += [(piece.lineno, part) for part in piece.value.split("/") if part in OWNED_DIRS]
    return sorted(out)


def _modules():
    for path in sorted(ARENA.rglob("*.py")):
        rel = path.relative_to(ARENA.parent).as_posix()
        if rel != "arena/runs/layout.py":
            yield rel, ast.parse(path.read_text())


def test_no_module_but_the_layout_spells_a_run_folder_file_name():
    found = []
    for rel, tree in _modules():
        for node in code_strings(tree):
            if node.value in OWNED and (rel, node.value) not in ELSEWHERE:
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert found == [], "use the arena.runs.layout constants (or RunFolder) instead: " + ", ".join(found)


def test_no_module_but_the_layout_builds_a_path_from_a_results_folder_name():
    found = [f"{rel}:{line} {name!r}" for rel, tree in _modules() for line, name in path_folder_names(tree)
             if (rel, name) not in ELSEWHERE]
    assert found == [], "use arena.runs.layout.Results (or RunFolder) instead: " + ", ".join(found)


def test_the_check_sees_a_literal_and_skips_a_docstring():
    # hand-made case: one docstring naming summary.json (allowed), one code literal (found)
    tree = ast.parse('def f(p):\n    """reads summary.json"""\n    return p / "summary.json"\n')
    assert [n.value for n in code_strings(tree) if n.value in OWNED] == ["summary.json"]
    assert [n.lineno for n in code_strings(tree) if n.value in OWNED] == [3]


def test_the_folder_check_sees_path_joins_and_skips_config_keys():
    # hand-made case, one line each; the expected hits, by hand:
    #   line 2  root / "evals" / eval_id          "evals" is an operand of `/`           -> found
    #   line 3  os.path.join(d, "bc", "latest")   an argument of os.path.join            -> found
    #   line 4  root.glob("sweeps/*/x")           a '/'-part of a glob pattern           -> found
    #   line 5  Path(f"{d}/runs/{c}")             an f-string's literal part "/runs/"    -> found
    #   line 6  cfg["bc"], {"report": 1}          a config key, a dict key: no path      -> skipped
    #   line 7  ", ".join(["steps", "policy"])    str.join, not os.path.join             -> skipped
    #   line 8  "a policy" / ... never happens; x == "ckpt" compares a name: no path     -> skipped
    source = ("def f(root, d, c, cfg, x, eval_id):\n"
              "    a = root / \"evals\" / eval_id\n"
              "    b = os.path.join(d, \"bc\", \"latest\")\n"
              "    g = root.glob(\"sweeps/*/x\")\n"
              "    p = Path(f\"{d}/runs/{c}\")\n"
              "    k = cfg[\"bc\"], {\"report\": 1}\n"
              "    s = \", \".join([\"steps\", \"policy\"])\n"
              "    return x == \"ckpt\"\n")
    assert path_folder_names(ast.parse(source)) == [(2, "evals"), (3, "bc"), (4, "sweeps"), (5, "runs")]


def test_results_gives_the_documented_layout_file_for_file(tmp_path, monkeypatch):
    # every path of the layout table (docs/design.md, Run folder), spelt out by hand, from a
    # relative results_dir: Results resolves it against the working directory
    monkeypatch.chdir(tmp_path)
    r = layout.Results("res")
    root = tmp_path.resolve() / "res"
    assert r.root == root and r == layout.Results(root)
    expected = {
        r.run("c1"): "runs/c1",
        r.sweep("sw"): "sweeps/sw",
        r.manifest("sw"): "sweeps/sw/manifest.json",
        r.cell("sw", "c1"): "sweeps/sw/cells/c1",
        r.search("sw", "grpo", "sokoban"): "sweeps/sw/search/grpo/sokoban",
        r.chosen("sw", "grpo", "sokoban"): "sweeps/sw/search/grpo/sokoban/chosen.json",
        r.report("sw"): "sweeps/sw/report",
        r.jobs("sw"): "sweeps/sw/jobs",
        r.eval_run("e1"): "evals/e1",
        r.eval_table: "evals/report.md",
        r.bc("h1"): "bc/h1",
        r.bc_model("h1"): "bc/h1/model",
        r.bc_report("h1"): "bc/h1/bc.json",
        r.bc_lock("h1"): "bc/h1.lock",
    }
    assert {p: p.relative_to(root).as_posix() for p in expected} == expected
    # the globs: two sweeps (one without a manifest yet), two evals (one unfinished)
    for rel in ("sweeps/b/manifest.json", "sweeps/a/manifest.json", "sweeps/a/cells/c2/x", "sweeps/c/cells/c1/x",
                "evals/e2/summary.json", "evals/e1/summary.json", "evals/e3/config.yaml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}")
    assert r.sweep_manifests() == [r.manifest("a"), r.manifest("b")]
    assert r.all_cells() == [r.cell("a", "c2"), r.cell("c", "c1")]
    assert r.eval_summaries() == [r.eval_run("e1") / "summary.json", r.eval_run("e2") / "summary.json"]
    assert layout.Results(tmp_path / "empty").sweep_manifests() == []  # no sweeps/ folder: none
