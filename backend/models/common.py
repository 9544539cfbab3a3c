"""Types shared by several schema families."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

# A session id becomes a directory name, so it may not contain a path separator.
SessionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
