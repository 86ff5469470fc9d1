"""The import graph of `arena/` has no cycles, counting every import statement (module level and
inside functions): a function-local import that only hides a cycle is still a cycle."""
import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "arena"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the arena modules it imports}. `from a.b import c` names a.b, or a.b.c when that
    is a module; a relative import is resolved against the importing module's package; a module
    importing its own package (`arena.x.y` -> `arena.x`) is left out, as Python runs the
    package's __init__ first anyway."""
    files = {module_name(f): f for f in PACKAGE.rglob("*.py")}

    def known(name: str):
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in files.items():
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                head = base[: len(base) - node.level + 1] if node.level else []
                source = ".".join(head + ([node.module] if node.module else []))
                targets |= {source} | {f"{source}.{a.name}" for a in node.names}
        graph[mod] = {t for t in map(known, (t for t in targets if t.startswith("arena"))) if t
                      and t != mod and not mod.startswith(t + ".")}
    return graph


def test_graph_sees_relative_and_function_local_imports():
    graph = import_graph()
    assert "arena.sweeps.ledger" in graph["arena.sweeps.pool"]  # `from .ledger import ...`
    assert "arena.backends" in graph["arena.cli"]  # imported inside a function


def test_arena_has_no_import_cycles():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
