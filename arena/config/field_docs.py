"""The documentation of each config key, read from the comments beside its definition, so the
help text (`arena <verb> --help`) is written once, where the key is defined
(docs/design.md, CLI grammar and exit codes).

A key's text is the comment block right above its line plus the comment at the end of the line:

    # arena.agent.prompts template          <- above
    prompt_template: str = "minimal"  # ... <- beside

The definitions read are the fields of a structured-config dataclass (recursively, as dotted
keys): the run config schema and the verbs' argument dataclasses. `dict_literal_keys` reads the
names a heavy module defines (the method presets) without importing it.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class KeyDoc:
    key: str  # dotted, e.g. "bc.steps"
    default: Any
    doc: str  # "" when the definition has no comment


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """{line number: (comment text without '#', whether the comment is the whole line)}."""
    out = {}
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            whole = not lines[row - 1][:col].strip()
            out[row] = (tok.string.lstrip("#").strip(), whole)
    return out


def _doc_at(line: int, comments: dict[int, tuple[str, bool]]) -> str:
    """The whole-line comments right above `line`, then the comment at its end."""
    above, row = [], line - 1
    while row in comments and comments[row][1]:
        above.insert(0, comments[row][0])
        row -= 1
    beside = [comments[line][0]] if line in comments and not comments[line][1] else []
    return " ".join(part for part in above + beside if part)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def dataclass_docs(cls: type, prefix: str = "") -> list[KeyDoc]:
    """Every leaf field of the structured-config dataclass `cls` (nested dataclasses become
    dotted keys), in definition order, with its default and comment."""
    source = inspect.getsource(inspect.getmodule(cls))
    comments = _comments(source)
    lines = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            lines[node.name] = {s.target.id: s.lineno for s in node.body
                                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    out = []
    for f in dataclasses.fields(cls):
        default = _default(f)
        if dataclasses.is_dataclass(default):
            out += dataclass_docs(type(default), f"{prefix}{f.name}.")
        else:  # an inherited field's line is in its base class (same module)
            where = next(c.__name__ for c in cls.__mro__ if f.name in lines.get(c.__name__, {}))
            out.append(KeyDoc(f"{prefix}{f.name}", default, _doc_at(lines[where][f.name], comments)))
    return out


def dict_literal_keys(path: Path, name: str) -> list[str]:
    """The string keys (or items) of the module-level dict (or tuple) literal `name` in the
    Python file `path`, read without importing it (its module may import torch or pandas)."""
    for node in ast.parse(Path(path).read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == name:
            items = node.value.keys if isinstance(node.value, ast.Dict) else getattr(node.value, "elts", [])
            return [k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    raise ValueError(f"{path}: no module-level literal {name}")
