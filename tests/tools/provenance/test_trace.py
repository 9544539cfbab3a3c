"""Number provenance (issue 14): each number of an answer cites the output line it came from."""

from __future__ import annotations

from typing import Any

from backend.tools.provenance import Passage, RunOutput, cite


def _by_text(citations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["text"]: c for c in citations}


def _spans_hold(answer: str, citations: list[dict[str, Any]]) -> None:
    for citation in citations:
        assert answer[citation["start"] : citation["end"]] == citation["text"]


RUN = RunOutput("run_a", "print(stats)", "mean: 21.25\nmedian: 20.0\nmin: 20\nmax: 48.5")


def test_a_sentence_cites_the_line_its_words_name() -> None:
    answer = "The mean is 21.3 and the median is 20, with a maximum of 48.5."
    citations = cite(answer, [RUN])
    _spans_hold(answer, citations)
    found = _by_text(citations)
    assert found["21.3"] == {
        "text": "21.3",
        "start": answer.index("21.3"),
        "end": answer.index("21.3") + 4,
        "kind": "computed",
        "run_id": "run_a",
        "code": "print(stats)",
        "output_line": "mean: 21.25",  # rounded: 21.25 shown as 21.3
        "line": 1,
        "source": None,
    }
    assert found["20"]["output_line"] == "median: 20.0"  # not "min: 20", an exact match
    assert found["48.5"]["output_line"] == "max: 48.5"


def test_rounding_is_traced_but_a_different_number_is_not() -> None:
    run = RunOutput("run_r", "print(df.x.mean())", "21.25")
    assert cite("It is 21.3.", [run])[0]["output_line"] == "21.25"
    assert cite("It is 21.25.", [run])[0]["output_line"] == "21.25"
    assert cite("It is 21.4.", [run]) == []  # never shown as traced
    assert cite("It is 21.", [run])[0]["output_line"] == "21.25"  # 21 is 21.25, to 0 decimals


TABLE_RUN = RunOutput(
    "run_t",
    "print(df.groupby('region').agg(total=('sales', 'sum'), orders=('id', 'count')))",
    "        total  orders\nregion               \nNorth   120.5      37\nSouth    99.25     37\n",
)


def test_a_table_cell_cites_its_row() -> None:
    answer = (
        "| Region | Total | Orders |\n|---|---|---|\n"
        "| North | 120.5 | 37 |\n| South | 99.3 | 37 |\n"
    )
    citations = cite(answer, [TABLE_RUN])
    _spans_hold(answer, citations)
    assert [(c["text"], c["output_line"]) for c in citations] == [
        ("120.5", "North   120.5      37"),
        ("37", "North   120.5      37"),
        ("99.3", "South    99.25     37"),
        ("37", "South    99.25     37"),  # the same number, its own row
    ]
    assert {c["line"] for c in citations} == {3, 4}


def test_a_list_item_cites_its_line_and_list_markers_are_not_numbers() -> None:
    answer = "Totals by region:\n\n1. North: 120.5\n2. South: 99.25\n"
    citations = cite(answer, [TABLE_RUN])
    _spans_hold(answer, citations)
    assert [(c["text"], c["output_line"]) for c in citations] == [
        ("120.5", "North   120.5      37"),
        ("99.25", "South    99.25     37"),
    ]
    bullets = "- **North**: 120.5 in 37 orders\n- **South**: 99.25"
    assert [c["output_line"].split()[0] for c in cite(bullets, [TABLE_RUN])] == [
        "North",
        "North",
        "South",
    ]


def test_a_number_in_several_outputs_cites_the_run_its_words_name_else_the_latest() -> None:
    first = RunOutput("run_1", "print('north:', n)", "rows: 1200\nnorth: 120.5")
    second = RunOutput("run_2", "print('south:', s)", "rows: 1200\nsouth: 120.5")
    by_words = cite("North sold 120.5, and South sold 120.5 too.", [first, second])
    assert [(c["run_id"], c["output_line"]) for c in by_words] == [
        ("run_1", "north: 120.5"),
        ("run_2", "south: 120.5"),
    ]
    latest = cite("There are 1,200 rows.", [first, second])
    assert [(c["text"], c["run_id"], c["output_line"]) for c in latest] == [
        ("1,200", "run_2", "rows: 1200")
    ]


def test_scaled_numbers_and_the_size_of_a_fall_cite_their_lines() -> None:
    run = RunOutput("run_s", "...", "revenue: 1234567.89\nmargin change: -0.0523\nunits: 3215")
    answer = "Revenue reached $1.23 million, though the margin fell by 5.2%; units grew to 3.2k."
    citations = cite(answer, [run])
    _spans_hold(answer, citations)
    assert [(c["text"], c["output_line"]) for c in citations] == [
        ("1.23", "revenue: 1234567.89"),
        ("5.2", "margin change: -0.0523"),
        ("3.2", "units: 3215"),
    ]
    assert cite("The margin change is 5.2%.", [run]) == []  # no fall named: -5.2% is not 5.2%


def test_question_numbers_and_document_numbers_are_told_apart() -> None:
    answer = "Yes: the mean, 21.3, is above 20. Revenue grew 12.5% in 2023 [1]."
    passages = [
        Passage(1, "report.pdf, page 3", "Revenue grew 12.5% in 2023, to 4.1 million."),
        Passage(2, "notes.md", "In 2023 the team had 12 people."),
    ]
    citations = cite(answer, [RUN], question="Is the mean above 20?", passages=passages)
    _spans_hold(answer, citations)
    assert [(c["text"], c["kind"], c["source"]) for c in citations] == [
        ("21.3", "computed", None),
        ("20", "question", "question"),
        ("12.5", "document", "[1] report.pdf, page 3"),
        ("2023", "document", "[1] report.pdf, page 3"),  # the passage the sentence cites
    ]
    assert all(c["run_id"] is None for c in citations[1:])


def test_untraceable_and_chance_numbers_are_not_cited() -> None:
    run = RunOutput("run_c", "print(df.head())", "id 3 price 99.1\nid 4 price 12.0\n7")
    assert cite("About 77 widgets were sold.", [run]) == []
    assert cite("There were 3 outliers.", [run]) == []  # a stray "3" in an unrelated line
    bare = cite("There were 7 outliers.", [run])  # the line is just the number
    assert [(c["text"], c["output_line"]) for c in bare] == [("7", "7")]
    assert cite("The price was 99.1 for id 3.", [run])[1]["output_line"] == "id 3 price 99.1"


def test_what_is_not_a_claim_is_not_cited() -> None:
    run = RunOutput("run_p", "...", "share: 0.42\nsaved plots/plot_3.png\n20")
    answer = (
        "The share is 42%.\n\n![plot_3](plots/plot_3.png)\n\n"
        "```python\nx = 20\n```\n\n```text\nshare: 0.42\n```"
    )
    citations = cite(answer, [run], files=["plots/plot_3.png"])
    _spans_hold(answer, citations)
    assert [(c["text"], c["output_line"]) for c in citations] == [
        ("42", "share: 0.42"),  # a percentage of a printed fraction
        ("0.42", "share: 0.42"),  # a plain-text block is the printed result
    ]


def test_offsets_index_the_answer_even_after_wide_characters() -> None:
    answer = "Moyenne (mean) pondérée 📈: 21.3"  # "mean": the line's label, so it supports it
    (citation,) = cite(answer, [RUN])
    assert answer[citation["start"] : citation["end"]] == "21.3"


def test_a_number_is_cited_only_where_its_line_supports_the_sentence() -> None:
    """Issue 39: 3112 was printed as East's total, so the green underline on "Total units
    per region: 3112" made a false sentence look checked."""
    run = RunOutput("run_u", "print(totals)", "East  3112\nWest  2000")
    assert cite("Total units per region: 3112", [run]) == []
    assert cite("Output:\n```\nTotal units per region: 3112\n```", [run]) == []
    (east,) = cite("East sold 3112 units.", [run])
    assert (east["text"], east["output_line"]) == ("3112", "East  3112")
    both = cite("East sold 3112 units and West 2000.", [run])
    assert [(c["text"], c["output_line"]) for c in both] == [
        ("3112", "East  3112"),
        ("2000", "West  2000"),
    ]
    # A line that labels nothing cannot be contradicted; one of the same record supports.
    assert cite("The total is 3112.", [RunOutput("run_b", "...", "[3112 2000]")])
    record = RunOutput("run_r", "...", "East 3112 47")
    assert [c["text"] for c in cite("They sold 3112 units in 47 orders.", [record])] == [
        "3112",
        "47",
    ]
    # Words that name the same figure: "highest" is "max", "average" is "mean".
    stats = RunOutput("run_s", "...", "max: 48.5\nmean: 21.25")
    assert [c["output_line"] for c in cite("The highest is 48.5; on average 21.25.", [stats])] == [
        "max: 48.5",
        "mean: 21.25",
    ]
