"""The floors that the import graph keeps (docs/design.md, Floors): a backend's insides are its
own, and what the backends share lives below them. Counted as in test_import_graph.py: every
import statement, module level and inside functions.

- No module outside `arena/backends/embedded/` imports from it (the backend table names its
  train entry as a "module:function" string, which is no import).
- `arena/evaluation/`, the shared floors `arena/lm/` and `arena/bc/`, and `scripts/` reach no
  module of `arena/backends/`, not even through other modules."""
import ast
from pathlib import Path

from tests.test_import_graph import PACKAGE, import_graph

EMBEDDED = "arena.backends.embedded"
BACKENDS = "arena.backends"
SCRIPTS = PACKAGE.parent / "scripts"
NO_BACKEND_BELOW = ("arena.evaluation", "arena.lm", "arena.bc")


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def named_modules(source: str) -> set[str]:
    """Every dotted name an absolute import statement of `source` names (scripts are no package,
    so they have no relative imports): `from a.b import c` names a.b and a.b.c."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def reached(graph: dict[str, set[str]], starts) -> set[str]:
    """The modules `starts` import, directly or through other modules."""
    seen, todo = set(), list(starts)
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_checks_see_backend_imports():
    graph = import_graph()
    assert "arena.backends.embedded.trainer" in graph["arena.backends.embedded.run"]  # inside the backend: allowed
    assert "arena.backends" in reached(graph, ["arena.cli"])  # the CLI dispatches to the backends
    assert {f"{BACKENDS}.embedded", f"{BACKENDS}.embedded.run", "arena", "arena.backends"} <= named_modules(
        "from arena.backends.embedded import run\nfrom arena import backends\n")
    assert {"arena.lm.evaluate", "arena.bc.train"} <= set(graph)  # the shared floors exist
    assert sorted(p.name for p in SCRIPTS.glob("*.py"))  # there are scripts to check


def test_no_module_outside_the_embedded_backend_imports_it():
    importers = sorted(f"{module} -> {target}" for module, targets in import_graph().items()
                       if not within(module, EMBEDDED) for target in targets if within(target, EMBEDDED))
    assert importers == [], "these import the embedded backend's insides; shared code belongs on arena.lm or arena.bc"


def test_evaluation_and_the_shared_floors_reach_no_backend():
    graph = import_graph()
    for floor in NO_BACKEND_BELOW:
        modules = [m for m in graph if within(m, floor)]
        assert modules, f"no modules under {floor}"
        backends = sorted(t for t in reached(graph, modules) if within(t, BACKENDS))
        assert backends == [], f"{floor} reaches {backends}"


def test_scripts_reach_no_backend():
    graph = import_graph()
    for script in sorted(SCRIPTS.rglob("*.py")):
        direct = {name for name in named_modules(script.read_text()) if name in graph}
        backends = sorted(t for t in direct | reached(graph, direct) if within(t, BACKENDS))
        assert backends == [], f"{script.relative_to(PACKAGE.parent)} reaches {backends}"
