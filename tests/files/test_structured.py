"""JSON, JSON lines, YAML and XML: shapes from bounded reads, nothing expanded."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.files.helpers import describe


def test_a_json_array_of_records_is_a_table(tmp_path: Path) -> None:
    path = tmp_path / "orders.json"
    path.write_text(json.dumps([{"id": i, "total": i * 2.5, "tags": ["a"]} for i in range(30)]))
    metadata = describe(path)
    assert metadata.kind == "tabular"
    assert metadata.details["keys"] == ["id", "total", "tags"]
    assert (metadata.details["rows"], metadata.details["rows_estimated"]) == (30, False)
    assert metadata.details["sample_rows"][1] == [1, 2.5, "['a']"]


def test_a_json_object_lists_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"name": "x", "items": [1, 2, 3], "nested": {"a": 1}}))
    metadata = describe(path)
    assert metadata.kind == "data"
    assert metadata.details["keys"] == ["name", "items", "nested"]
    assert metadata.details["types"] == {"name": "str", "items": "array[3]", "nested": "object"}


def test_a_json_over_the_parse_cap_is_described_from_its_start(tmp_path: Path) -> None:
    records = tmp_path / "big.json"
    record = {"id": 123456, "city": "Lisbon", "value": 3.25}
    count = 500_000
    records.write_text("[" + ",\n".join([json.dumps(record)] * count) + "]")
    assert records.stat().st_size > 20 * 1024 * 1024
    started = time.perf_counter()
    metadata = describe(records)
    assert time.perf_counter() - started < 1.0
    assert metadata.kind == "tabular"
    assert metadata.details["keys"] == ["id", "city", "value"]
    assert metadata.details["rows_estimated"] is True
    assert abs(metadata.details["rows"] - count) / count < 0.05
    assert "first bytes" in metadata.details["note"]

    mapping = tmp_path / "big_object.json"
    blob = json.dumps(["x" * 100] * 250_000)
    mapping.write_text('{"title": "t", "version": 2, "payload": ' + blob + ', "tail": 1}')
    metadata = describe(mapping)
    assert metadata.kind == "data"
    assert metadata.details["keys"] == ["title", "version", "payload"]


def test_invalid_json_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"a": ')
    assert describe(path).error is not None


def test_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = [json.dumps({"t": i, "level": "info"}) for i in range(12)]
    path.write_text("\n".join([*lines, '{"t": 12, "lev']) + "\n")
    metadata = describe(path)
    assert metadata.kind == "tabular"
    assert (metadata.details["keys"], metadata.details["rows"]) == (["t", "level"], 13)
    assert metadata.details["invalid_lines_in_sample"] == 1


def test_yaml_is_parsed_safely(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("model: small\nlayers: 4\ndata:\n  path: x.csv\n")
    metadata = describe(path)
    assert metadata.details["keys"] == ["model", "layers", "data"]
    hostile = tmp_path / "hostile.yml"
    hostile.write_text("a: !!python/object/apply:os.system ['echo pwned']\n")
    metadata = describe(hostile)
    assert metadata.error is None
    assert "parse_error" in metadata.details
    assert metadata.details["first_lines"][0].startswith("a: !!python")


def test_xml_root_and_children(tmp_path: Path) -> None:
    path = tmp_path / "feed.xml"
    path.write_text("<?xml version='1.0'?><feed><entry/><entry/><title>x</title></feed>")
    metadata = describe(path)
    assert metadata.details["root"] == "feed"
    assert metadata.details["children"] == {"entry": 2, "title": 1}


def test_xml_entities_are_never_expanded(tmp_path: Path) -> None:
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    path = tmp_path / "laughs.xml"
    path.write_text(f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY l0 "lol">{laughs}]><r>&l9;</r>')
    started = time.perf_counter()
    metadata = describe(path)
    assert time.perf_counter() - started < 1.0
    assert metadata.error is None
    assert "entities" in metadata.details["parse_error"]
