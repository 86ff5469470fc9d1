"""The import graph of `arena/` has no cycles and keeps the floors docs/design.md declares
(§F, Floors: a package imports only packages on lower floors), counting every import statement
(module level and inside functions): a function-local import that only hides a cycle is still a
cycle."""
import ast
import graphlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "arena"
DESIGN = PACKAGE.parent / "docs" / "design.md"


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


def package_of(module: str) -> str:
    """arena.runs.folder -> arena.runs; arena.cli -> arena.cli (a top-level module is its own package)."""
    return ".".join(module.split(".")[:2])


def declared_floors() -> dict[str, int]:
    """{package: floor} from the table in docs/design.md's Floors section (`| 3 | `arena/config/` |`)."""
    text = DESIGN.read_text()
    section = text[text.index("### Floors\n"):]
    section = section[: section.index("\n### ", 1)]
    floors = {}
    for floor, cells in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M):
        for path in re.findall(r"`arena/(\w+)(?:/|\.py)`", cells):
            assert f"arena.{path}" not in floors, f"arena/{path} is on two floors"
            floors[f"arena.{path}"] = int(floor)
    return floors


def floor_violations(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import from a package to one on its own floor or above it, and every package of the
    graph missing from `floors`, as readable lines."""
    problems = sorted({f"{package_of(m)} is on no floor (docs/design.md, Floors)"
                       for m in graph if m != "arena" and package_of(m) not in floors})
    for module, targets in sorted(graph.items()):
        source = package_of(module)
        for target in sorted(targets):
            dest = package_of(target)
            if dest == source or source not in floors or dest not in floors or module == "arena":
                continue
            if floors[dest] >= floors[source]:
                problems.append(f"{module} (floor {floors[source]}) imports {target} (floor {floors[dest]})")
    return problems


def test_floors_table_is_read():
    floors = declared_floors()
    assert floors["arena.io"] == 1 and floors["arena.cli"] == max(floors.values())
    assert floors["arena.config"] < floors["arena.runs"] < floors["arena.lm"] < floors["arena.backends"]


def test_packages_keep_their_floors():
    problems = floor_violations(import_graph(), declared_floors())
    assert not problems, "\n".join(problems)


def test_a_planted_loop_breaks_the_floors():
    # envs (floor 2) importing runs (floor 4) and runs importing config (3), which imports envs:
    # the package loop config -> envs -> runs -> config. The checker names the upward import.
    graph, floors = import_graph(), declared_floors()
    before = set(floor_violations(graph, floors))
    graph["arena.envs.household_games"] = graph["arena.envs.household_games"] | {"arena.runs.folder"}
    assert set(floor_violations(graph, floors)) - before == {
        "arena.envs.household_games (floor 2) imports arena.runs.folder (floor 4)"}
    # a package the table does not name is refused too
    assert floor_violations({**graph, "arena.newpkg.x": set()}, floors)[0] == (
        "arena.newpkg is on no floor (docs/design.md, Floors)")


def function_local_imports() -> list[tuple[Path, int, bool]]:
    """(file, line, whether a `# lazy:` comment says why) of every arena import inside a function.
    A comment on the import's line, or on the comment lines right above it (one comment may
    stand above a run of imports), counts."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        nodes = {id(n): n for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in nodes.values():
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if not (getattr(node, "level", 0) or any(n.startswith("arena") for n in names)):
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
                above -= 1  # a run of imports shares the comment above it
            explained = "# lazy:" in lines[node.lineno - 1] or (above >= 0 and "# lazy:" in lines[above])
            found.append((path, node.lineno, explained))
    return found


# Function-local arena imports: only where they keep a verb's --help or a module's import fast
# (a `# lazy:` comment says which: e.g. "keeps torch out of this module's import"). The caps
# hold the count where it is; lower them as imports move to their module's top.
MAX_LOCAL_IMPORTS = 68
MAX_UNEXPLAINED_LOCAL_IMPORTS = 0


def test_function_local_imports_are_few_and_say_why():
    found = function_local_imports()
    unexplained = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path, line, why in found if not why]
    assert len(found) <= MAX_LOCAL_IMPORTS, f"{len(found)} function-local arena imports (cap {MAX_LOCAL_IMPORTS})"
    assert len(unexplained) <= MAX_UNEXPLAINED_LOCAL_IMPORTS, "without a `# lazy:` reason:\n" + "\n".join(unexplained)
