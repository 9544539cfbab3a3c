"""A session's data files, for the API routes, python_coder and RAG alike.

Metadata of each workspace file (read without loading it, in an isolated parser
process: `isolation.py`), cached per file (`catalog.py`), the variables data files
are loaded into (pandas, or DuckDB relations for large tables), a lexical
pre-ranking of files against a question, the METADATA block for prompts, and
safe archive extraction.
"""

from __future__ import annotations

from backend.files.archive_checks import ArchiveLimits, UnsafeArchive
from backend.files.archives import safe_extract, safe_extract_at
from backend.files.model import FileKind, FileMetadata, UnsupportedFileType
from backend.files.prompt import describe_for_prompt
from backend.files.ranking import rank_files
from backend.files.variables import (
    InvalidFileMapping,
    assign_dataframe_names,
    loader_code,
    plain_loads,
    validate_file_paths,
)

__all__ = [
    "ArchiveLimits",
    "FileKind",
    "FileMetadata",
    "InvalidFileMapping",
    "UnsafeArchive",
    "UnsupportedFileType",
    "assign_dataframe_names",
    "describe_for_prompt",
    "loader_code",
    "plain_loads",
    "rank_files",
    "safe_extract",
    "safe_extract_at",
    "validate_file_paths",
]
