"""File preparation for the python_coder tool.

Metadata of each workspace file (read without loading it), the variables data
files are loaded into, a lexical pre-ranking of files against a question, the
METADATA block for prompts, and safe archive extraction.
"""

from __future__ import annotations

from backend.tools.python_coder.files.archive_checks import ArchiveLimits, UnsafeArchive
from backend.tools.python_coder.files.archives import safe_extract, safe_extract_at
from backend.tools.python_coder.files.metadata import extract_file_metadata
from backend.tools.python_coder.files.model import FileKind, FileMetadata, UnsupportedFileType
from backend.tools.python_coder.files.prompt import describe_for_prompt
from backend.tools.python_coder.files.ranking import rank_files
from backend.tools.python_coder.files.variables import (
    InvalidFileMapping,
    assign_dataframe_names,
    loader_code,
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
    "extract_file_metadata",
    "loader_code",
    "rank_files",
    "safe_extract",
    "safe_extract_at",
    "validate_file_paths",
]
