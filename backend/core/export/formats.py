"""Export cells as a Jupyter notebook (nbformat 4.5) or a Python script (`# %%` cells).

The notebook carries the session's own outputs (printed text and plots), so it
reads as a finished analysis before anyone reruns it. The script opens in
editors that understand `# %%` cells and runs with plain `python`: it prints
the same lines and saves each step's figures under `outputs/`.
"""

from __future__ import annotations

import base64
import json
import platform
from collections.abc import Sequence
from typing import Any

from backend.core.export.cells import Cell


def _lines(text: str) -> list[str]:
    """nbformat's multi-line string: a list of lines that keep their newlines."""
    return text.splitlines(keepends=True)


def _outputs(cell: Cell) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    if cell.stdout:
        outputs.append({"output_type": "stream", "name": "stdout", "text": _lines(cell.stdout)})
    for image in cell.images:
        outputs.append(
            {
                "output_type": "display_data",
                "data": {
                    "image/png": base64.b64encode(image).decode("ascii"),
                    "text/plain": ["<Figure>"],
                },
                "metadata": {},
            }
        )
    if cell.result:  # a table the cell ended with, shown as Jupyter shows a DataFrame
        outputs.append(
            {
                "output_type": "execute_result",
                "execution_count": None,
                "data": {"text/plain": _lines(cell.result)},
                "metadata": {},
            }
        )
    return outputs


def as_notebook(cells: Sequence[Cell], session_id: str) -> str:
    notebook_cells = []
    for number, cell in enumerate(cells, start=1):
        entry: dict[str, Any] = {
            "cell_type": cell.kind,
            "id": f"cell-{number}",
            "metadata": {},
            "source": _lines(cell.source),
        }
        if cell.kind == "code":
            entry.update(execution_count=None, outputs=_outputs(cell))
        notebook_cells.append(entry)
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python", "version": platform.python_version()},
            "python_data_agent": {"session_id": session_id},
        },
        "cells": notebook_cells,
    }
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def as_script(cells: Sequence[Cell]) -> str:
    parts = []
    for cell in cells:
        if cell.kind == "markdown":
            text = "\n".join(f"# {line}".rstrip() for line in cell.source.splitlines())
            parts.append(f"# %% [markdown]\n{text}")
        else:
            saving = f"\nsave_figures({cell.figures_from!r})" if cell.figures_from else ""
            parts.append(f"# %%\n{cell.source}{saving}")
    return "\n\n".join(parts) + "\n"
