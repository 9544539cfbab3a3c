"""A session's variables on disk, in safe formats only; runs inside the sandbox.

DataFrame/Series -> parquet, ndarray -> .npy (allow_pickle=False), JSON-able values
-> json, matplotlib figures -> png. Nothing is ever pickled, so nothing here (or in
the server, which reads only the JSON catalog) can execute code on load. Other
values stay in memory only and are listed as such in the catalog.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import types
from typing import Any

CATALOG = "variables_metadata.json"
MAX_JSON_ITEMS = 100_000
MAX_WORKSPACE_FILES = 10_000
# DuckDB's own row group: the server pages a shown DataFrame's Parquet (shown_tables.py)
# a row group at a time, so pyarrow's default (1 Mi rows) costs ~8x its memory per query.
PARQUET_ROW_GROUP = 122_880
MAX_FILES_SCANNED = MAX_WORKSPACE_FILES + 1  # one past the limit shows it was crossed


def user_variables(namespace: dict[str, Any]) -> dict[str, Any]:
    skipped = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_") and not isinstance(value, skipped)
    }


def _jsonable(value: Any, budget: list[int]) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return all(_jsonable(item, budget) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v, budget) for k, v in value.items())
    return False


def kind_of(value: Any) -> str | None:
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure

    if isinstance(value, pd.DataFrame):
        return "dataframe"
    if isinstance(value, pd.Series):
        return "series"
    if isinstance(value, np.ndarray):
        return "ndarray" if not value.dtype.hasobject else None
    if isinstance(value, np.generic):
        return "json"
    if isinstance(value, Figure):
        return "figure"
    return "json" if _jsonable(value, [MAX_JSON_ITEMS]) else None


def fingerprint(value: Any) -> str:
    """Changes when the value changes, including in-place edits of arrays and frames."""
    import numpy as np

    kind = kind_of(value)
    digest = hashlib.blake2b(digest_size=16)
    try:
        if kind in ("dataframe", "series"):
            frame = value.to_frame() if kind == "series" else value
            for name in frame.columns:
                _hash_values(frame[name], digest)
            _hash_values(frame.index, digest)
            digest.update(repr((list(frame.columns), frame.dtypes.tolist())).encode())
        elif kind == "ndarray":
            digest.update(np.ascontiguousarray(value).tobytes())
            digest.update(repr((value.shape, value.dtype)).encode())
        elif kind == "json":
            digest.update(json.dumps(_plain(value), sort_keys=True).encode())
        else:
            return f"object:{id(value)}"
    except (TypeError, ValueError):  # unhashable cells: treat as changed every run
        return f"unhashable:{id(value)}:{os.urandom(4).hex()}"
    return f"{kind}:{digest.hexdigest()}"


def _hash_values(values: Any, digest: Any) -> None:
    """Feed a column or index to `digest`: raw bytes when numeric, pandas' hash otherwise."""
    import numpy as np
    import pandas as pd

    if isinstance(values, pd.RangeIndex):
        digest.update(repr((values.start, values.stop, values.step)).encode())
        return
    array = values.to_numpy()
    if array.dtype.hasobject:
        array = pd.util.hash_pandas_object(pd.Series(array), index=False).to_numpy()
    digest.update(np.ascontiguousarray(array).tobytes())


def fingerprints(namespace: dict[str, Any]) -> dict[str, str]:
    return {name: fingerprint(value) for name, value in user_variables(namespace).items()}


def _plain(value: Any) -> Any:
    import numpy as np

    return value.item() if isinstance(value, np.generic) else value


def _describe(name: str, value: Any, kind: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": type(value).__name__, "format": "memory"}
    if kind in ("dataframe", "series", "ndarray"):
        entry["shape"] = list(value.shape)
    if kind == "dataframe":
        entry["columns"] = [str(c) for c in value.columns][:50]
    return entry


def _save(name: str, value: Any, directory: str) -> dict[str, Any]:
    import numpy as np

    kind = kind_of(value)
    entry = _describe(name, value, kind)
    formats = {
        "dataframe": ("parquet", f"pd.read_parquet('variables/{name}.parquet')"),
        "series": ("parquet", f"pd.read_parquet('variables/{name}.parquet').iloc[:, 0]"),
        "ndarray": ("npy", f"np.load('variables/{name}.npy', allow_pickle=False)"),
        "json": ("json", f"json.load(open('variables/{name}.json'))"),
        "figure": ("png", None),
    }
    if kind is None:
        return entry
    extension, load = formats[kind]
    path = os.path.join(directory, f"{name}.{extension}")
    draft = path + ".partial"
    try:
        if kind == "dataframe":
            value.to_parquet(draft, row_group_size=PARQUET_ROW_GROUP)
        elif kind == "series":
            value.to_frame(name=str(value.name) if value.name is not None else name).to_parquet(
                draft
            )
        elif kind == "ndarray":
            with open(draft, "wb") as handle:
                np.save(handle, value, allow_pickle=False)
        elif kind == "json":
            with open(draft, "w") as handle:
                json.dump(_plain(value), handle)
        else:
            value.savefig(draft, format="png")
        os.replace(draft, path)
    except Exception as exc:
        entry["note"] = f"kept in memory only: {type(exc).__name__}: {exc}"[:300]
        return entry
    entry.update(format=kind if kind in ("series", "figure") else extension,
                 file=f"variables/{name}.{extension}")  # fmt: skip
    if load:
        entry["load"] = load
    return entry


def _remove_files(entry: dict[str, Any], workspace: str) -> None:
    if "file" in entry:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(workspace, entry["file"]))


# Names through which a cell can reach variables it does not name.
_REFLECTIVE = frozenset({"globals", "vars", "locals", "exec", "eval", "getattr", "setattr"})


def names_to_check(code: types.CodeType, namespace: dict[str, Any]) -> set[str] | None:
    """The variables a cell could have changed, or None when it could have changed any.

    A cell changes what it names, and the same objects under other names (aliases).
    When it names a function or class it defined, a container we cannot see into, or
    a reflective builtin, anything may have changed, and everything is checked.
    """
    referenced: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        referenced.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    if referenced & _REFLECTIVE:
        return None
    data = user_variables(namespace)
    for name in referenced:
        value = namespace.get(name)
        if isinstance(value, types.FunctionType | type):
            return None
        if name in data and kind_of(value) is None:
            return None  # an opaque object may hold references to anything
    touched = {id(data[name]) for name in referenced if name in data}
    return {name for name, value in data.items() if name in referenced or id(value) in touched}


def persist(
    namespace: dict[str, Any],
    known: dict[str, str],
    directory: str,
    only: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Save the variables whose fingerprint changed; update `known` and the catalog.

    `only` limits the check to those names (see `names_to_check`); new names are
    always checked.
    """
    workspace = os.path.dirname(directory)
    os.makedirs(directory, exist_ok=True)
    catalog = read_catalog(directory)
    current = user_variables(namespace)
    removed = [n for n in catalog if n not in current]
    for name in removed:
        _remove_files(catalog.pop(name), workspace)
        known.pop(name, None)
    changed = []
    for name, value in current.items():
        if only is not None and name not in only and name in known and name in catalog:
            continue
        mark = fingerprint(value)
        if known.get(name) == mark and name in catalog:
            continue
        known[name] = mark
        if name in catalog:
            _remove_files(catalog[name], workspace)
        catalog[name] = _save(name, value, directory)
        changed.append(catalog[name])
    if not changed and not removed:
        return changed
    draft = os.path.join(directory, CATALOG + ".partial")
    with open(draft, "w") as handle:
        json.dump(catalog, handle, indent=1)
    os.replace(draft, os.path.join(directory, CATALOG))
    return changed


def _open_regular(path: str) -> Any:
    """Open a file the run may have tampered with: no links, no FIFOs, no devices."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{os.path.basename(path)} is not a regular file")
    return os.fdopen(fd, "rb")


def read_catalog(directory: str) -> dict[str, dict[str, Any]]:
    try:
        with _open_regular(os.path.join(directory, CATALOG)) as handle:
            catalog = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(catalog, dict):
        return {}
    return {k: v for k, v in catalog.items() if isinstance(k, str) and isinstance(v, dict)}


def restore(namespace: dict[str, Any], directory: str) -> tuple[list[str], list[str]]:
    """Load the catalog's variables back; returns (restored names, problems)."""
    import numpy as np
    import pandas as pd

    restored, problems = [], []
    for name, entry in read_catalog(directory).items():
        if not name.isidentifier() or entry.get("format") in ("memory", "figure", None):
            continue
        path = os.path.join(directory, os.path.basename(str(entry.get("file", ""))))
        try:
            with _open_regular(path) as handle:
                if entry["format"] == "parquet":
                    value: Any = pd.read_parquet(handle)
                elif entry["format"] == "series":
                    value = pd.read_parquet(handle).iloc[:, 0]
                elif entry["format"] == "npy":
                    value = np.load(handle, allow_pickle=False)
                elif entry["format"] == "json":
                    value = json.load(handle)
                else:
                    continue
        except Exception as exc:
            problems.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            continue
        namespace[name] = value
        restored.append(name)
    return restored, problems


def snapshot_files(root: str, cap: int = MAX_FILES_SCANNED) -> dict[str, tuple[int, int]]:
    """Workspace files (not following links) with their mtime and size, at most `cap`."""
    seen: dict[str, tuple[int, int]] = {}
    stack = [root]
    while stack and len(seen) < cap:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            relative = os.path.relpath(entry.path, root)
            if relative == "variables":
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                seen[relative] = (stat.st_mtime_ns, stat.st_size)
    return seen


def changed_files(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> list[str]:
    return sorted(path for path, mark in after.items() if before.get(path) != mark)


def oversized_files(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], max_bytes: int
) -> list[str]:
    """Files the run wrote that are over the file size limit (only a DuckDB run's can be)."""
    return [path for path in changed_files(before, after) if after[path][1] > max_bytes]


def remove_files(root: str, paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(root, path))
