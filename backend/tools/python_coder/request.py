"""What a caller asks python_coder to do."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CoderRequest:
    session_id: str
    query: str
    files: list[str] | None = None  # workspace paths to use; None: choose from uploads
    file_paths: dict[str, str] | None = None  # workspace path -> variable name
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, content), oldest first
    plan: str = ""  # the plan context, when called from Plan-and-Execute
    react: list[str] = field(default_factory=list)  # earlier failed attempts and their errors
    question: str = ""  # the user's message, when an agent asks for `query` to answer it
