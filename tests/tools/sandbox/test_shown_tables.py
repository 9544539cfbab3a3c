"""The tables a run shows: last expression, print, changed DataFrame variables; Parquet files."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pandas as pd
import pytest

from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor
from backend.tools.sandbox.table_result import parse_tables, table_file

LIMITS = ExecutorLimits(timeout=20, max_memory_mb=1024, max_file_mb=50)
BWRAP = SandboxStatus("bwrap", "test")


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[SandboxedExecutor]:
    workspace = Workspaces(tmp_path).ensure("u1-session")
    async with SandboxedExecutor(workspace, LIMITS, BWRAP) as running:
        yield running


async def test_last_expression_is_a_table_and_printed(executor: SandboxedExecutor) -> None:
    code = "import pandas as pd\npd.DataFrame({'a': [3, 1, 2], 'b': ['x', 'y', None]})\n"
    result = await executor.run(code)
    assert result.success, result.error
    assert "a" in result.stdout and "x" in result.stdout  # the model's compact text
    [table] = result.tables
    assert (table.source, table.rows, table.name) == ("expression", 3, "")
    assert [(c.name, c.type) for c in table.columns] == [("a", "int64"), ("b", "large_string")]
    assert table.preview == [[3, "x"], [1, "y"], [2, None]]
    assert result.files == []  # a table's own file is not one of the run's files
    frame = pd.read_parquet(executor.workspace / table_file(table.id))
    assert frame["a"].tolist() == [3, 1, 2]


async def test_printed_frames_polars_and_duckdb(executor: SandboxedExecutor) -> None:
    code = (
        "import polars as pl, duckdb\n"
        "p = pl.DataFrame({'n': [1, 2, 3]})\n"
        "print(p)\n"
        "print(duckdb.sql('select 42 as answer'))\n"
        "print('done')\n"
    )
    result = await executor.run(code)
    assert result.success, result.error
    sources = [(t.source, t.name, t.rows, t.preview[0]) for t in result.tables]
    assert sources == [("printed", "p", 3, [1]), ("printed", "", 1, [42])]


async def test_changed_variables_link_to_their_parquet(executor: SandboxedExecutor) -> None:
    first = await executor.run("import pandas as pd\nsales = pd.DataFrame({'x': range(5)})\n")
    # No output and no file: a failed attempt for python_coder, but a table all the same.
    assert first.success and [t.name for t in first.tables] == ["sales"]
    table = first.tables[0]
    path = executor.workspace / table_file(table.id)
    variable = executor.workspace / "variables" / "sales.parquet"
    assert os.stat(path).st_ino == os.stat(variable).st_ino  # a hard link, no copy
    second = await executor.run("sales['x'] = sales['x'] * 10\nprint(sales['x'].sum())\n")
    assert second.success and second.tables[0].preview[1] == [10]
    assert pd.read_parquet(path)["x"].tolist() == [0, 1, 2, 3, 4]  # the first turn's data stays


async def test_at_most_five_and_unparquetable_frames_are_skipped(
    executor: SandboxedExecutor,
) -> None:
    code = (
        "import pandas as pd\n"
        "frames = [pd.DataFrame({'i': [i]}) for i in range(8)]\n"
        "bad = pd.DataFrame({'m': [1, 'a', object()]})\n"
        "print(bad)\n"
        "for f in frames: print(f)\n"
    )
    result = await executor.run(code)
    assert result.success, result.error
    assert [t.preview[0][0] for t in result.tables] == [0, 1, 2, 3, 4]


async def test_failed_run_shows_no_table(executor: SandboxedExecutor) -> None:
    result = await executor.run("import pandas as pd\nprint(pd.DataFrame({'a': [1]}))\n1/0\n")
    assert not result.success and result.tables == []


def test_forged_tables_are_dropped() -> None:
    good = {"id": "0123456789ab_1", "source": "printed", "rows": 1, "columns": [], "preview": []}
    forged = [
        good,
        {**good, "id": "../../etc/passwd_1"},
        {**good, "id": "ffffffffffff_1"},  # another run's
        {**good, "rows": -1},
        "not a table",
    ]
    assert [t.id for t in parse_tables(forged, "0123456789ab")] == ["0123456789ab_1"]
    with pytest.raises(ValueError):
        table_file("../x")
