"""Static pre-filter for LLM-written Python code.

This is *not* the security boundary: the code later runs inside an OS sandbox (bubblewrap),
which is what actually contains it. This check exists so the LLM gets a clear, fixable
message early ("line 3: import of 'subprocess' is not allowed ...") instead of an opaque
sandbox failure. It parses the code with :mod:`ast`, never executes it, never raises, and
runs in time linear in the size of the syntax tree.
"""

from __future__ import annotations

import ast
import string
import warnings

__all__ = ["ALLOWED_MODULES", "check_code"]

_ALLOWED_TEXT = """
    numpy pandas scipy sklearn matplotlib seaborn plotly statsmodels sympy openpyxl pyarrow duckdb
    math cmath statistics decimal fractions random datetime time calendar zoneinfo json csv re
    string textwrap unicodedata collections itertools functools operator heapq bisect array copy
    pprint typing dataclasses enum abc numbers io base64 hashlib uuid warnings glob pathlib
    contextlib polars altair
"""
_ALLOWED_ORDER: tuple[str, ...] = tuple(_ALLOWED_TEXT.split())
ALLOWED_MODULES: frozenset[str] = frozenset(_ALLOWED_ORDER)
"""Top-level module names that LLM-written code may import."""

_ALLOWED_HINT = ", ".join(_ALLOWED_ORDER[:10]) + ", ..."
_BLOCKED_BUILTINS = frozenset(
    {"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"}
    | {"input", "exit", "quit", "help", "memoryview"}
)
_ATTR_FUNCS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_BLOCKED_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "__build_class__"})
_ALLOWED_DUNDERS = frozenset({"__name__", "__doc__", "__len__", "__version__"})
_FORMAT_METHODS = frozenset({"format", "format_map"})
_MAX_MESSAGES = 20
_TOO_DEEP = "syntax error: the code is nested too deeply to check; split it into simpler steps"


def _is_blocked_dunder(name: str) -> bool:
    return (
        len(name) > 4
        and name.startswith("__")
        and name.endswith("__")
        and (name not in _ALLOWED_DUNDERS)
    )


def _format_has_dunder(fmt: str, depth: int = 0) -> bool:
    """Whether a str.format template reaches for a dunder, e.g. ``"{0.__globals__}"``."""
    try:
        for _literal, field, spec, _conv in string.Formatter().parse(fmt):
            if field is not None and "__" in field:
                return True
            if spec and "{" in spec and depth < 3 and _format_has_dunder(spec, depth + 1):
                return True
    except ValueError:  # malformed template: .format() would fail at run time anyway
        return False
    return False


class _Checker(ast.NodeVisitor):
    """Collects ``(line, message)`` problems while walking a module's syntax tree."""

    def __init__(self) -> None:
        self.problems: list[tuple[int, str]] = []
        # Names bound by allowed imports (``from re import compile``) shadow the builtins.
        self.imported: set[str] = set()

    def add(self, node: ast.AST | None, message: str) -> None:
        line = getattr(node, "lineno", None) or 1
        self.problems.append((line, f"line {line}: {message}"))

    def messages(self) -> list[str]:
        ordered = sorted(dict.fromkeys(self.problems), key=lambda item: item[0])
        return [message for _line, message in ordered[:_MAX_MESSAGES]]

    def _check_module(self, node: ast.AST, module: str) -> bool:
        if module.split(".")[0] in ALLOWED_MODULES:
            return True
        self.add(
            node,
            f"import of '{module}' is not allowed here; use the allowed packages ({_ALLOWED_HINT})",
        )
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self._check_module(node, alias.name) and alias.asname:
                self.imported.add(alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(
                node,
                f"relative import ('from {'.' * node.level}{node.module or ''} import ...') "
                f"is not allowed; import the allowed packages by name ({_ALLOWED_HINT})",
            )
        elif self._check_module(node, node.module or ""):
            for alias in node.names:
                if _is_blocked_dunder(alias.name):
                    self.add(node, f"importing the dunder name '{alias.name}' is not allowed")
                elif alias.name != "*":
                    self.imported.add(alias.asname or alias.name)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in _BLOCKED_BUILTINS and name not in self.imported:
            self.add(node, f"use of '{name}' is not allowed; write the code directly instead")
        elif name in _ATTR_FUNCS and name not in self.imported:
            self.add(
                node,
                f"'{name}' may only be called directly with a string literal attribute name, "
                f'e.g. {name}(obj, "mean")',
            )
        elif name in _BLOCKED_NAMES:
            self.add(node, f"use of the name '{name}' is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_blocked_dunder(node.attr):
            self.add(
                node,
                f"access to the dunder attribute '{node.attr}' is not allowed "
                f"(only {', '.join(sorted(_ALLOWED_DUNDERS))} are)",
            )
        if node.attr in _FORMAT_METHODS and isinstance(node.value, ast.Constant):
            self._check_format(node, node.value.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _ATTR_FUNCS and func.id not in self.imported:
            self._check_attr_call(node, func.id)
            for child in (*node.args, *node.keywords):
                self.visit(child)
            return
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "format"
            and isinstance(func.value, ast.Name)
            and func.value.id == "str"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            self._check_format(node, node.args[0].value)
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:  # ``case object(__class__=c)`` reads an attribute
            if _is_blocked_dunder(attr):
                self.add(node, f"matching on the dunder attribute '{attr}' is not allowed")
        self.generic_visit(node)

    def _check_attr_call(self, node: ast.Call, func: str) -> None:
        args = node.args
        plain = len(args) >= 2 and not node.keywords
        plain = plain and not any(isinstance(arg, ast.Starred) for arg in args)
        name = args[1] if plain else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            self.add(
                node,
                f'{func}() needs a string literal attribute name, e.g. {func}(obj, "mean"); '
                "computed attribute names are not allowed",
            )
        elif _is_blocked_dunder(name.value):
            self.add(node, f"{func}() of the dunder attribute '{name.value}' is not allowed")

    def _check_format(self, node: ast.AST, template: object) -> None:
        if isinstance(template, str) and _format_has_dunder(template):
            self.add(
                node,
                "dunder access in a format string (e.g. '{0.__class__}') is not allowed; "
                "format plain values instead",
            )


def check_code(code: str) -> list[str]:
    """Human-readable problems with `code`; an empty list means it may run."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences in the LLM's code
            tree = ast.parse(code, filename="<code>", mode="exec")
    except SyntaxError as exc:
        line = exc.lineno or _null_byte_line(code)
        return [f"line {line}: syntax error: {exc.msg or exc}"]
    except (ValueError, TypeError) as exc:  # null bytes (older Pythons), lone surrogates
        return [f"line {_null_byte_line(code)}: syntax error: {exc}"]
    except (RecursionError, MemoryError):
        return [f"line 1: {_TOO_DEEP}"]
    checker = _Checker()
    try:
        checker.visit(tree)
    except RecursionError:
        checker.add(None, _TOO_DEEP)
    return checker.messages()


def _null_byte_line(code: object) -> int:
    if isinstance(code, str) and "\0" in code:
        return code.count("\n", 0, code.index("\0")) + 1
    return 1
