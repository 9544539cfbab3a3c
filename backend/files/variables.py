"""Which variable each data file is loaded into, and the code that loads them.

Mappings go from workspace-relative path to variable name, as in the API's
`file_paths` ({"uploads/a.csv": "sales"}). Tabular files get `df1`, `df2`, …
unless the user named them. `loader_code` writes the Python that runs inside
the sandbox (whose working directory is the workspace) before the user's or
the model's code; paths and options enter it only through `repr`.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Collection, Sequence
from typing import Any

from backend.files.model import FileMetadata, file_extension
from backend.storage.s3_objects import S3Location, is_s3
from backend.storage.workspaces import UnsafePath, safe_relative

MAX_MAPPED = 100
# Names the generated code and typical analysis code rely on.
RESERVED_NAMES = frozenset({"pd", "np", "plt", "sns", "px", "os", "sys", "json", "math", "re"})
_DELIMITED = ("csv", "tsv", "txt", "dat")
# How the sandbox opens a large table as a DuckDB relation (backend/tools/sandbox/out_of_core.py).
_RELATION_READERS = {
    **dict.fromkeys(_DELIMITED, "read_csv"),
    "parquet": "read_parquet",
    "json": "read_json",
    "jsonl": "read_json",
}
_LARGE_TABLES = "variables/large_tables.json"
_DEFAULT_SEP = {"tsv": "\t"}
_SNIFFER = """\
def _sniffed_sep(path):
    with open(path, encoding="latin-1", newline="") as handle:
        head = handle.read(65536)
    try:
        return _csv.Sniffer().sniff(head, delimiters=",;\\t|").delimiter
    except _csv.Error:
        return ","
"""


class InvalidFileMapping(ValueError):
    """A `file_paths` entry has an unsafe path or an unusable variable name."""


def assign_dataframe_names(
    files: Sequence[FileMetadata], taken: Collection[str] = ()
) -> dict[str, str]:
    """`df1`, `df2`, … for the readable tabular files, in order, skipping `taken` names."""
    mapping: dict[str, str] = {}
    number = 0
    for metadata in files:
        if metadata.kind != "tabular" or metadata.error or metadata.name in mapping:
            continue
        number += 1
        while f"df{number}" in taken:
            number += 1
        mapping[metadata.name] = f"df{number}"
    return mapping


def _check_entry(path: str, variable: str) -> None:
    """What the generated code needs: a workspace path and an identifier."""
    try:
        safe_relative(path)
    except UnsafePath:
        raise InvalidFileMapping(f"{path!r} is not a path inside the workspace") from None
    if not variable.isidentifier() or keyword.iskeyword(variable):
        raise InvalidFileMapping(f"{variable!r} (for {path!r}) is not a Python variable name")


def _s3_path(name: str) -> str:
    try:
        return S3Location.parse(name).cached_path
    except UnsafePath:
        raise InvalidFileMapping(f"{name!r} is not an s3://bucket/key name") from None


def validate_file_paths(file_paths: dict[str, str]) -> dict[str, str]:
    """A user's path -> variable mapping, checked; raises `InvalidFileMapping`.

    Besides safe paths and identifiers, names must not start with `_`, hide a
    builtin or a usual module alias (`pd`, `np`, …), or be used twice.
    """
    if len(file_paths) > MAX_MAPPED:
        raise InvalidFileMapping(f"at most {MAX_MAPPED} files can be mapped to variables")
    seen: dict[str, str] = {}
    for path, variable in file_paths.items():
        _check_entry(path if not is_s3(path) else _s3_path(path), variable)
        if variable.startswith("_") or variable in RESERVED_NAMES or hasattr(builtins, variable):
            raise InvalidFileMapping(
                f"{variable!r} (for {path!r}) is a name Python or analysis code already uses"
            )
        if variable in seen:
            raise InvalidFileMapping(f"{seen[variable]!r} and {path!r} both map to {variable!r}")
        seen[variable] = path
    return dict(file_paths)


def _call(function: str, path: str, options: dict[str, Any], module: str = "_pd") -> str:
    arguments = [repr(path), *(f"{key}={value!r}" for key, value in options.items())]
    return f"{module}.{function}({', '.join(arguments)})"


def _parquet_copy(metadata: FileMetadata | None) -> str | None:
    """The file's complete Parquet copy (`files/conversion.py`), read in its place."""
    copy = metadata.details.get("parquet") if metadata else None
    return copy if isinstance(copy, str) else None


def _load_expression(path: str, metadata: FileMetadata | None, pd: str = "_pd") -> str | None:
    """The pandas call (pandas imported as `pd`) that loads `path`; None: not a table."""
    copy = _parquet_copy(metadata)
    if copy is not None:
        return _call("read_parquet", copy, {}, pd)
    extension = file_extension(path)
    if extension in _DELIMITED:
        options = dict(metadata.details.get("read_options", {})) if metadata else {}
        if not options:
            sep = _DEFAULT_SEP.get(extension)
            return _call("read_csv", path, {"sep": sep}, pd) if sep else None
        return _call("read_csv", path, options, pd)
    if extension in ("xlsx", "xlsm", "xls"):
        return _call("read_excel", path, {"sheet_name": 0}, pd)
    if extension == "parquet":
        return _call("read_parquet", path, {}, pd)
    if extension == "feather":
        return _call("read_feather", path, {}, pd)
    if extension == "json":
        return _call("read_json", path, {}, pd)
    if extension == "jsonl":
        return _call("read_json", path, {"lines": True}, pd)
    return None


def _large_table(path: str, metadata: FileMetadata | None) -> dict[str, Any] | None:
    """How the sandbox opens `path` as a DuckDB relation, if it is too large for pandas."""
    extension = file_extension(path)
    reader = _RELATION_READERS.get(extension)
    if metadata is None or not metadata.large:
        return None
    copy = _parquet_copy(metadata)
    if copy is not None:
        return {"reader": "read_parquet", "path": copy, "options": {}}
    if reader is None:
        return None  # a large spreadsheet still goes to pandas: DuckDB cannot read it here
    options: dict[str, Any] = {}
    sep = (metadata.details.get("read_options") or {}).get("sep") or _DEFAULT_SEP.get(extension)
    if reader == "read_csv" and sep:
        options["sep"] = sep
    return {"reader": reader, "path": path, "options": options}


def _recording(tables: dict[str, dict[str, Any]]) -> list[str]:
    """Lines that record `tables` (variable -> how to open it) for every later run."""
    return [
        "import json as _json",
        "try:",
        f"    with open({_LARGE_TABLES!r}, encoding='utf-8') as _handle:",
        "        _tables = _json.load(_handle)",
        "except (OSError, ValueError):",
        "    _tables = {}",
        f"_tables.update({tables!r})",
        f"with open({_LARGE_TABLES!r}, 'w', encoding='utf-8') as _handle:",
        "    _json.dump(_tables, _handle)",
        *(f"globals().pop({name!r}, None)  # opened afresh by each run" for name in tables),
        "del _json, _tables, _handle",
    ]


def plain_loads(
    mapping: dict[str, str], files: Sequence[FileMetadata] = ()
) -> list[tuple[str, str, str]]:
    """(path, variable, expression) per mapped file, in plain Python for a notebook: pandas as
    `pd`, a large table as a `duckdb` relation, a file that is not a table as its path."""
    known = {metadata.name: metadata for metadata in files}
    loads = []
    for path, variable in mapping.items():
        _check_entry(path, variable)
        table = _large_table(path, known.get(path))
        if table is not None:
            expression = _call(table["reader"], table["path"], table["options"], "duckdb")
        else:
            expression = _load_expression(path, known.get(path), "pd") or (
                _call("read_csv", path, {"sep": None, "engine": "python"}, "pd")
                if file_extension(path) in _DELIMITED
                else repr(path)
            )
        loads.append((path, variable, expression))
    return loads


def loader_code(mapping: dict[str, str], files: Sequence[FileMetadata] = ()) -> str:
    """Python source loading each mapped file into its variable ("" for no mapping).

    With the files' metadata, delimited text is read with the sniffed separator,
    encoding and header; without it, the separator is sniffed in the sandbox.
    A file that is not a table (a PDF, an image, an archive) gets its path as a
    string, so the code can still open it. A table too large for pandas
    (`FileMetadata.large`) becomes a DuckDB relation, recorded here and opened
    afresh by each run that names it (backend/tools/sandbox/out_of_core.py).
    Raises `InvalidFileMapping` for an unsafe path or a variable that is not an
    identifier.
    """
    if not mapping:
        return ""
    known = {metadata.name: metadata for metadata in files}
    lines: list[str] = []
    tables: dict[str, dict[str, Any]] = {}
    sniffing = False
    for path, variable in mapping.items():
        _check_entry(path, variable)
        table = _large_table(path, known.get(path))
        if table is not None:
            tables[variable] = table
            continue
        expression = _load_expression(path, known.get(path))
        if expression is None and file_extension(path) in _DELIMITED:
            expression, sniffing = f"_pd.read_csv({path!r}, sep=_sniffed_sep({path!r}))", True
        lines.append(f"{variable} = {expression or repr(path)}")
    recording = _recording(tables) if tables else []
    if not lines:
        return "\n".join(recording) + "\n"
    header = ["import pandas as _pd"]
    footer = ["del _pd"]
    if sniffing:
        header = ["import csv as _csv", *header, "", _SNIFFER]
        footer = ["del _pd, _csv, _sniffed_sep"]
    return "\n".join([*header, *lines, *footer, *recording]) + "\n"
