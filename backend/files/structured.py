"""JSON, JSON lines, YAML and XML: their shape, from a bounded read.

JSON under `MAX_JSON_PARSE` is parsed whole; a bigger one is described from its
first `SAMPLE_BYTES` (the first elements of an array, the first keys of an
object). YAML goes only through `yaml.safe_load`, and only when small. XML is
walked by expat for its root and child tags, refusing entity declarations, so
nothing is ever expanded or fetched.
"""

from __future__ import annotations

import json
import xml.parsers.expat
from typing import Any

import yaml  # type: ignore[import-untyped]

from backend.files.cells import jsonable
from backend.files.model import FileMetadata, Source, estimate_count
from backend.files.text import FIRST_LINES, read_sample

MAX_JSON_PARSE = 20 * 1024 * 1024
MAX_YAML_PARSE = 1024 * 1024
MAX_KEYS = 50
MAX_RECORDS = 1000
SAMPLE_ROWS = 5
_DECODER = json.JSONDecoder()


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return f"array[{len(value)}]"
    return "null" if value is None else type(value).__name__


def _columns(records: list[dict[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for record in records[:MAX_RECORDS]:
        names.update(dict.fromkeys(str(key) for key in record))
    return list(names)[:MAX_KEYS]


def _records(
    source: Source, fmt: str, records: list[dict[str, Any]], rows: int, estimated: bool
) -> FileMetadata:
    """An array of objects (or JSON lines of them): a table."""
    columns = _columns(records)
    approx = "~" if estimated else ""
    return source.describe(
        "tabular",
        f"{fmt} records, {len(columns)} keys, {approx}{rows:,} rows",
        {
            "columns": [
                {"name": name, "dtype": _type_name(records[0].get(name)) if records else "unknown"}
                for name in columns
            ],
            "keys": columns,
            "rows": rows,
            "rows_estimated": estimated,
            "sample_rows": [
                [jsonable(record.get(name)) for name in columns] for record in records[:SAMPLE_ROWS]
            ],
        },
    )


def _shape(source: Source, data: Any) -> FileMetadata:
    if isinstance(data, list) and data and all(isinstance(item, dict) for item in data[:100]):
        return _records(source, "JSON", data, len(data), False)
    if isinstance(data, dict):
        keys = list(data)[:MAX_KEYS]
        return source.describe(
            "data",
            f"JSON object, {len(data)} keys: {', '.join(map(str, keys[:8]))}",
            {"top_level": "object", "keys": keys, "types": {k: _type_name(data[k]) for k in keys}},
        )
    details: dict[str, Any] = {"top_level": _type_name(data)}
    if isinstance(data, list):
        details["length"] = len(data)
        details["first_element"] = _type_name(data[0]) if data else None
    return source.describe("data", f"JSON {details['top_level']}", details)


def _array_prefix(text: str, start: int) -> tuple[list[Any], int]:
    """The array elements that fit in `text`, and where the last one ended."""
    items: list[Any] = []
    position = end = start
    while len(items) < MAX_RECORDS:
        try:
            item, end = _DECODER.raw_decode(text, _skip_space(text, position))
        except json.JSONDecodeError:
            break
        items.append(item)
        position = _skip_space(text, end)
        if not text.startswith(",", position):
            break
        position += 1
    return items, end


def _object_prefix(text: str, start: int) -> list[str]:
    """The keys of a top-level object whose values fit in `text`, plus the one cut off."""
    keys: list[str] = []
    position = start
    while len(keys) < MAX_KEYS:
        try:
            key, position = _DECODER.raw_decode(text, _skip_space(text, position))
        except json.JSONDecodeError:
            break
        keys.append(str(key))
        position = _skip_space(text, position)
        if not text.startswith(":", position):
            break
        try:
            _value, position = _DECODER.raw_decode(text, _skip_space(text, position + 1))
        except json.JSONDecodeError:
            break
        position = _skip_space(text, position)
        if not text.startswith(",", position):
            break
        position += 1
    return keys


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _large_json(source: Source) -> FileMetadata:
    sample = read_sample(source)
    text = sample.text
    start = _skip_space(text, 0)
    note = f"over {MAX_JSON_PARSE // 1024**2} MB: described from its first bytes"
    if text.startswith("[", start):
        items, end = _array_prefix(text, start + 1)
        if items and all(isinstance(item, dict) for item in items):
            used = len(text[:end].encode(sample.encoding, errors="replace"))
            metadata = _records(
                source, "JSON", items, estimate_count(source.size, used, len(items)), True
            )
            metadata.details["note"] = note
            return metadata
        details: dict[str, Any] = {
            "top_level": "array",
            "first_element": _type_name(items[0]) if items else None,
        }
    elif text.startswith("{", start):
        details = {"top_level": "object", "keys": _object_prefix(text, start + 1)}
    else:
        raise ValueError("does not start like JSON")
    details["note"] = note
    return source.describe("data", f"JSON {details['top_level']} (large)", details)


def describe_json(source: Source) -> FileMetadata:
    if source.size > MAX_JSON_PARSE:
        return _large_json(source)
    return _shape(source, json.loads(source.read_at(0, MAX_JSON_PARSE)))


def describe_jsonl(source: Source) -> FileMetadata:
    sample = read_sample(source)
    lines = [line for line in sample.text.splitlines() if line.strip()]
    parsed: list[Any] = []
    invalid = 0
    for line in lines[:MAX_RECORDS]:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            invalid += 1
    if lines and not parsed:
        raise ValueError("no line of the sample is valid JSON")
    if sample.complete:
        rows, estimated = len(lines), False
    else:
        rows, estimated = estimate_count(source.size, sample.byte_count, len(lines)), True
    if parsed and all(isinstance(item, dict) for item in parsed):
        metadata = _records(source, "JSON lines", parsed, rows, estimated)
        if invalid:
            metadata.details["invalid_lines_in_sample"] = invalid
        return metadata
    return source.describe(
        "data",
        f"JSON lines, {'~' if estimated else ''}{rows:,} values",
        {"rows": rows, "rows_estimated": estimated, "first_lines": sample.lines(SAMPLE_ROWS)},
    )


def describe_yaml(source: Source) -> FileMetadata:
    sample = read_sample(source, MAX_YAML_PARSE)
    details: dict[str, Any] = {"first_lines": sample.lines(FIRST_LINES)}
    summary = "YAML document"
    if sample.complete:
        try:
            data = yaml.safe_load(sample.text)
        except yaml.YAMLError as exc:
            details["parse_error"] = str(exc).splitlines()[0]
        else:
            details["top_level"] = _type_name(data)
            if isinstance(data, dict):
                details["keys"] = [str(key) for key in list(data)[:MAX_KEYS]]
                summary = f"YAML mapping, keys: {', '.join(details['keys'][:8])}"
            else:
                summary = f"YAML {details['top_level']}"
    return source.describe("data", summary, details)


class _XmlShape:
    """Root and child tags, gathered by expat; entity declarations stop the walk."""

    def __init__(self) -> None:
        self.depth = 0
        self.root: str | None = None
        self.children: dict[str, int] = {}

    def start(self, name: str, _attributes: dict[str, str]) -> None:
        self.depth += 1
        if self.depth == 1:
            self.root = name
        elif self.depth == 2 and (name in self.children or len(self.children) < MAX_KEYS):
            self.children[name] = self.children.get(name, 0) + 1

    def end(self, _name: str) -> None:
        self.depth -= 1


def _refuse_entities(*_args: object) -> None:
    raise ValueError("the XML declares entities, which are never expanded here")


def describe_xml(source: Source) -> FileMetadata:
    sample = read_sample(source)
    shape = _XmlShape()
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.EntityDeclHandler = _refuse_entities
    parser.StartElementHandler = shape.start
    parser.EndElementHandler = shape.end
    details: dict[str, Any] = {"first_lines": sample.lines(FIRST_LINES)}
    try:
        parser.Parse(sample.text, sample.complete)
    except (xml.parsers.expat.ExpatError, ValueError) as exc:
        details["parse_error"] = str(exc)
    details["root"] = shape.root
    details["children"] = shape.children
    summary = f"XML, root <{shape.root}>" if shape.root else "XML document"
    if shape.children:
        summary += " with " + ", ".join(
            f"<{tag}>×{n}" for tag, n in list(shape.children.items())[:5]
        )
    return source.describe("data", summary, details)
