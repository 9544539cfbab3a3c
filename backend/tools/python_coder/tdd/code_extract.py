"""Finding one function's code in a model's reply, however it was written.

Replies come fenced or bare, with prose around the code, example calls, a
`__main__` block, or copies of the other planned functions. What we keep is
the module-level code that defines things (imports, functions, classes,
constants), minus redefinitions of the other planned functions: those have
their own implementations, tested separately.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^(?:def |async def |import |from \S+ import |@|class )")
_MAX_LINES = 400
_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


@dataclass
class Implementation:
    """One function's code, or why there is none that may run."""

    code: str = ""
    problems: list[str] = field(default_factory=list)


def extract_function(reply: str, name: str, others: Collection[str] = ()) -> Implementation:
    """The code in `reply` that defines the function `name` (and its own helpers)."""
    for candidate in _candidates(reply):
        tree = _parse(candidate)
        if tree is None:
            continue
        defined = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        if defined:
            planned = {name, *others}
            code = _definitions(candidate, tree, planned - {name}, planned)
            return Implementation(code=code)
        if any(isinstance(n, ast.AsyncFunctionDef) and n.name == name for n in tree.body):
            return Implementation(
                problems=[f"`{name}` must be a plain `def` function, not `async def`"]
            )
    return Implementation(
        problems=[f"the reply has no valid Python code defining a function named `{name}`"]
    )


def _candidates(reply: str) -> list[str]:
    """Fenced blocks (Python ones first), the whole reply, then code cut out of prose."""
    fenced = [(language, body) for language, body in _FENCE.findall(reply)]
    ordered = [body for language, body in fenced if language.lower() in ("python", "py")]
    ordered += [body for language, body in fenced if language.lower() not in ("python", "py")]
    return [*ordered, reply, *_cut_from_prose(reply)]


def _cut_from_prose(reply: str) -> list[str]:
    """The longest parseable run of lines from the first line that looks like code."""
    lines = reply.splitlines()[:_MAX_LINES]
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return []
    for end in range(len(lines), start, -1):
        text = "\n".join(lines[start:end])
        if _parse(text) is not None:
            return [text]
    return []


def _parse(code: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _definitions(code: str, tree: ast.Module, others: set[str], planned: set[str]) -> str:
    lines = code.splitlines()
    kept: list[str] = []
    for node in tree.body:
        if not isinstance(node, _KEPT) or _is_future_import(node):
            continue
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in others:
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign) and _calls_any(node, planned):
            continue  # an example call, not a definition
        decorators = getattr(node, "decorator_list", [])
        first = min([node.lineno, *(d.lineno for d in decorators)])
        end = node.end_lineno or node.lineno
        kept.append("\n".join(lines[first - 1 : end]).rstrip())
    return "\n\n".join(kept) + "\n"


def _calls_any(node: ast.stmt, names: set[str]) -> bool:
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names
        for call in ast.walk(node)
    )


def _is_future_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def top_level_definitions(code: str) -> str:
    """`code`'s imports and definitions, without its docstring or `__future__` import."""
    tree = _parse(code)
    if tree is None:
        raise ValueError("the code does not parse")
    return _definitions(code, tree, set(), set())
