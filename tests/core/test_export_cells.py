"""The export's cells: one loading cell, and a reload only where the sandbox's would matter."""

from __future__ import annotations

from backend.core.export.cells import Cell, build_cells
from backend.core.export.inputs import InputFile
from backend.tools.python_coder.steps import FileLoad, SessionStep

SALES = FileLoad(
    path="uploads/sales.csv", variable="df1", expression="pd.read_csv('uploads/sales.csv')"
)
OTHER = FileLoad(
    path="uploads/other.csv", variable="df1", expression="pd.read_csv('uploads/other.csv')"
)
BIG = FileLoad(
    path="uploads/big.csv", variable="df2", expression="duckdb.read_csv('uploads/big.csv')"
)


def _step(
    code: str,
    *loads: FileLoad,
    kind: str = "generate",
    tests: str = "",
    files: tuple[str, ...] = (),
) -> SessionStep:
    return SessionStep.model_validate(
        {"kind": kind, "run_id": "run_x", "question": "Q", "code": code, "loads": loads,
         "tests": tests, "files": files}
    )  # fmt: skip


def _code(cells: list[Cell]) -> list[str]:
    return [cell.source for cell in cells if cell.kind == "code"][1:]  # after the setup cell


def _cells(*steps: SessionStep, script: bool = False) -> list[Cell]:
    inputs = [InputFile("uploads/sales.csv", 3, "ab" * 32)]
    return build_cells(
        "T", "s", steps, inputs, [("python", "3.11")], lambda _: b"png", script=script
    )


def test_a_file_loads_once_while_no_step_changes_its_variable() -> None:
    cells = _cells(_step("print(df1.x.sum())", SALES), _step("print(len(df1))", SALES))
    assert _code(cells) == [
        "df1 = pd.read_csv('uploads/sales.csv')",
        "print(df1.x.sum())",
        "print(len(df1))",
    ]


def test_a_step_after_one_that_changed_the_variable_reloads_it_as_the_sandbox_did() -> None:
    for changing in ("df1 = df1.dropna()", "df1['y'] = 1", "df1.drop(columns='x', inplace=True)",
                     "df1.insert(0, 'z', 1)", "del df1['x']"):  # fmt: skip
        cells = _cells(_step(changing, SALES), _step("print(len(df1))", SALES))
        assert _code(cells)[2] == "df1 = pd.read_csv('uploads/sales.csv')\n\nprint(len(df1))"


def test_a_variable_mapped_to_another_file_is_reloaded_in_its_step() -> None:
    cells = _cells(_step("print(1)", SALES), _step("print(2)", OTHER))
    assert _code(cells)[2].startswith("df1 = pd.read_csv('uploads/other.csv')\n\n")


def test_a_large_table_is_a_duckdb_relation_and_the_header_imports_duckdb() -> None:
    cells = _cells(_step("print(df2.count('*'))", BIG))
    setup = next(cell.source for cell in cells if cell.kind == "code")
    assert "import duckdb" in setup
    assert _code(cells)[0] == "df2 = duckdb.read_csv('uploads/big.csv')"


def test_a_repeated_tdd_solution_is_one_step_and_a_script_saves_figures() -> None:
    tdd = _step("def f():\n    return 1", kind="tdd", tests="run_tests()")
    plot = _step("plt.plot([1])", SALES, files=("outputs/plot_run_x_1.png",))
    cells = _cells(tdd, tdd, plot, script=True)
    assert _code(cells).count("def f():\n    return 1") == 1
    assert 'matplotlib.use("Agg")' in next(c.source for c in cells if c.kind == "code")
    assert cells[-1].figures_from == "step_2" and cells[-1].images == [b"png"]  # no gap
