"""A session as a clean notebook or script: only the steps that worked, ready to rerun.

`export_session` reads the session's steps (`core/step_log.py`), hashes its
inputs, and lays the steps out as cells (`cells.py`) in either format
(`formats.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from backend.core.export.cells import build_cells
from backend.core.export.formats import as_notebook, as_script
from backend.core.export.inputs import input_files, library_versions
from backend.storage.sessions import SessionKey, client_id
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces
from backend.tools.python_coder.steps import SessionStep

ExportFormat = Literal["ipynb", "py"]
MAX_PLOT_BYTES = 10 * 1024 * 1024  # a larger image stays out of the notebook (it reruns)
_PNG = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Export:
    filename: str
    media_type: str
    body: str


def export_session(
    workspaces: Workspaces,
    session_id: SessionKey,
    title: str,
    steps: list[SessionStep],
    export_format: ExportFormat,
) -> Export:
    """The export of `steps` (blocking: it hashes the inputs and reads the plots)."""

    def plot(path: str) -> bytes | None:
        try:
            with workspaces.open_file(session_id, path) as handle:
                image = handle.read(MAX_PLOT_BYTES + 1)
        except (OSError, UnsafePath, NotARegularFile):
            return None
        return image if image.startswith(_PNG) and len(image) <= MAX_PLOT_BYTES else None

    loaded = {load.path for step in steps for load in step.loads}
    inputs = input_files(workspaces, session_id, loaded)
    script = export_format == "py"
    shown = client_id(session_id)  # the id its owner knows, never the key
    cells = build_cells(title, shown, steps, inputs, library_versions(), plot, script=script)
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", title).strip("-")[:60] or "session"
    if script:
        return Export(f"{name}.py", "text/x-python; charset=utf-8", as_script(cells))
    return Export(f"{name}.ipynb", "application/x-ipynb+json", as_notebook(cells, shown))
