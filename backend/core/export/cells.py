"""A session's steps as notebook cells: a header, the file loading, then each step.

The cells rerun outside the server: no sandbox loader, no persisted variables,
only pandas (and DuckDB for a table too large for pandas) reading copies of
the inputs from the folder the notebook runs in. The sandbox loaded each mapped
file afresh before every python_coder run, so a later step reloads a file only
when an earlier step may have changed its variable, or when it maps the variable
to another file: a reader sees one loading cell, and the numbers stay the same.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from backend.core.export.inputs import InputFile
from backend.tools.python_coder.steps import FileLoad, SessionStep

# Methods that change their object in place without `inplace=True`.
_MUTATING_METHODS = frozenset(
    {"insert", "pop", "update", "append", "extend", "sort", "clear", "remove", "setdefault"}
)
_SETUP = """\
import hashlib
import os
{matplotlib}
import matplotlib.pyplot as plt
import pandas as pd{duckdb}

# The session's input files, as they were when it was exported.
INPUTS = {inputs}
for path, sha256 in INPUTS.items():
    if not os.path.isfile(path):
        print(f"Missing input: {{path}} (copy it next to this notebook)")
    elif hashlib.sha256(open(path, "rb").read()).hexdigest() != sha256:
        print(f"Changed since the session: {{path}}")
os.makedirs("outputs", exist_ok=True)  # where the session's code saved its files\
"""
_AGG = '\nimport matplotlib\n\nmatplotlib.use("Agg")  # a script saves its figures to files'
_SAVE_FIGURES = '''

def save_figures(name):
    """What the session's sandbox did after each step: save the figures it drew, then close them."""
    for number in plt.get_fignums():
        plt.figure(number).savefig(f"outputs/{name}_{number}.png", dpi=100)
    plt.close("all")\
'''


@dataclass
class Cell:
    kind: Literal["markdown", "code"]
    source: str
    stdout: str = ""  # what the session printed, shown before a rerun
    result: str = ""  # the last expression's value (a table), as a notebook shows it
    images: list[bytes] = field(default_factory=list)  # the session's plots (PNG)
    figures_from: str = ""  # a script saves the step's figures under this name


Plots = Callable[[str], bytes | None]  # a workspace image's bytes, None if it cannot be read


def build_cells(
    title: str,
    session_id: str,  # the id its owner knows, never the key
    steps: Sequence[SessionStep],
    inputs: Sequence[InputFile],
    versions: Sequence[tuple[str, str]],
    plots: Plots,
    *,
    script: bool = False,
) -> list[Cell]:
    """Every cell of the export, in order; `script`: for a .py file (figures are saved)."""
    cells = [
        Cell("markdown", _header(title, session_id, inputs, versions)),
        Cell("code", _setup(steps, inputs, script)),
    ]
    bound: dict[str, str] = {}  # variable -> the expression that loaded it
    stale: set[str] = set()  # loaded variables a step may have changed since
    question = None
    previous: SessionStep | None = None
    number = 0
    for step in steps:
        if step.kind == "tdd" and previous is not None and _same_work(step, previous):
            continue  # the same solution again (TDD answers a repeated request from its cache)
        previous = step
        number += 1
        reload = [
            load
            for load in step.loads
            if bound.get(load.variable) != load.expression or load.variable in stale
        ]
        if reload and not bound:
            cells.append(Cell("markdown", "## Loading the files"))
            cells.append(Cell("code", _loading(reload)))
            reload = []
        for load in step.loads:
            bound[load.variable] = load.expression
            stale.discard(load.variable)
        stale.update(name for name in bound if _may_change(step.code, name))
        if step.question and step.question != question:
            cells.append(Cell("markdown", _question(step)))
        question = step.question
        cells.extend(_step_cells(number, step, reload, plots, script))
    return cells


def _header(
    title: str,
    session_id: str,  # the id its owner knows, never the key
    inputs: Sequence[InputFile],
    versions: Sequence[tuple[str, str]],
) -> str:
    table = [
        "| Input file | Bytes | SHA-256 |",
        "|---|---:|---|",
        *(f"| `{f.path}` | {f.size} | `{f.sha256}` |" for f in inputs),
    ]
    return "\n".join(
        [
            f"# {_one_line(title)}",
            "",
            f"Exported from session `{session_id}`: the steps that succeeded, in order.",
            "To rerun it, put copies of the input files at these paths, relative to this",
            "notebook, and run every cell.",
            "",
            "**Read the code before you run it.** A model wrote it, and on the server it ran in",
            "a sandbox without network or access to your files; here it runs with your rights.",
            "",
            *(table if inputs else ["(No input files.)"]),
            "",
            "Libraries: " + ", ".join(f"{name} {version}" for name, version in versions) + ".",
        ]
    )


def _setup(steps: Sequence[SessionStep], inputs: Sequence[InputFile], script: bool) -> str:
    uses_duckdb = any(load.expression.startswith("duckdb.") for s in steps for load in s.loads)
    listed = "{\n" + "".join(f"    {f.path!r}: {f.sha256!r},\n" for f in inputs) + "}"
    setup = _SETUP.format(
        matplotlib=_AGG if script else "",
        duckdb="\nimport duckdb" if uses_duckdb else "",
        inputs=listed if inputs else "{}",
    )
    return setup + _SAVE_FIGURES if script else setup


def _loading(loads: Sequence[FileLoad]) -> str:
    return "\n".join(
        f"{load.variable} = {load.expression}"
        + ("" if repr(load.path) in load.expression else f"  # {load.path}")
        for load in loads
    )


def _question(step: SessionStep) -> str:
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in step.question.splitlines())
    return f"## Question\n\n{quoted}"


def _step_cells(
    number: int, step: SessionStep, reload: list[FileLoad], plots: Plots, script: bool
) -> list[Cell]:
    what = {"generate": step.goal, "code": "your code", "tdd": "functions built test-first"}
    title = f"**Step {number}**" + (f": {_one_line(what[step.kind])}" if what[step.kind] else "")
    code = step.code.strip()
    if reload:
        code = f"{_loading(reload)}\n\n{code}"
    images = [image for path in step.files if (image := plots(path)) is not None]
    stdout, result = "" if step.kind == "tdd" else step.output, ""
    if step.display and stdout.rstrip("\n").endswith(step.display):  # the sandbox printed it
        stdout, result = stdout.rstrip("\n")[: -len(step.display)], step.display
    cells = [
        Cell("markdown", title),
        Cell(
            "code",
            code,
            stdout=stdout,
            result=result,
            images=images,
            figures_from=f"step_{number}" if script and images else "",
        ),
    ]
    if step.tests:
        cells.append(Cell("markdown", "Its tests:"))
        cells.append(Cell("code", step.tests.strip(), stdout=step.output + "\n"))
    return cells


def _same_work(step: SessionStep, other: SessionStep) -> bool:
    return (step.kind, step.code, step.tests) == (other.kind, other.code, other.tests)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _may_change(code: str, name: str) -> bool:
    """Whether `code` may rebind or modify `name` (if in doubt, it may)."""
    if not re.search(rf"\b{re.escape(name)}\b", code):
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute | ast.Subscript) and isinstance(
            node.ctx, ast.Store | ast.Del
        ):
            base: ast.expr = node
            while isinstance(base, ast.Attribute | ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id == name:
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and (
                node.func.attr in _MUTATING_METHODS
                or any(keyword.arg == "inplace" for keyword in node.keywords)
            )
        ):
            return True
    return False
