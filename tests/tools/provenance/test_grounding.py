"""An answer states only numbers a run printed (allowing for rounding)."""

from __future__ import annotations

from backend.tools.provenance import ungrounded_numbers

OUTPUT = "mean price: 20.123456\nrows: 1,204\nshare: 0.25\n"


def test_rounded_numbers_from_the_output_are_grounded() -> None:
    answer = "- The mean price is **20.12** over 1,204 rows (1204 in total); share 0.25, 20."
    assert ungrounded_numbers(answer, OUTPUT) == []


def test_invented_and_misrounded_numbers_are_caught() -> None:
    assert ungrounded_numbers("The mean is 20.13 and the max is 99.", OUTPUT) == ["20.13", "99"]


def test_list_markers_and_file_names_do_not_count() -> None:
    answer = "1. The share is 0.25\n2. See ![the plot](outputs/plot_3.png) and `df2`"
    assert ungrounded_numbers(answer, OUTPUT, ["outputs/plot_3.png"]) == []


def test_numbers_hidden_in_code_spans_link_text_or_fake_markers_are_checked() -> None:
    assert ungrounded_numbers("The mean is 20.12 and the total is `999`.", OUTPUT) == ["999"]
    assert ungrounded_numbers("See [total 12345](outputs/a.png)", OUTPUT) == ["12345"]
    assert ungrounded_numbers("Mean 20.12\n42. percent growth", OUTPUT) == ["42"]
    # A number from the question is not evidence: "is it above 100?" -> "it is 100".
    assert ungrounded_numbers("The mean is 100.", OUTPUT) == ["100"]


def test_scaled_and_signed_numbers_are_read_as_capable_models_write_them() -> None:
    printed = "revenue: 1234567.89\nusers: 45210\nchange: -0.052\ncorr: -0.85\n"
    answer = "Revenue was $1.23 million (1.2M) from 45.2k users; sales fell by 5.2%."
    assert ungrounded_numbers(answer, printed) == []
    assert ungrounded_numbers("Revenue was 1.3 million.", printed) == ["1.3e+06"]
    # A sign is only left to the words when they say it: "fell by"; not a bare "0.85".
    assert ungrounded_numbers("The correlation is 0.85; it is −0.85.", printed) == ["0.85"]
    assert ungrounded_numbers("Sales grew by 5.2%.", printed) == ["5.2"]


def test_scientific_notation_is_as_precise_as_its_digits() -> None:
    printed = "p-value: 1.5e-05\nrows: 1.234568e+06\n"
    assert ungrounded_numbers("p = 0.000015 over 1,234,568 rows (1.23e6).", printed) == []
    # "1.5e-05" is written to 6 decimals: it is not "anything within 0.05".
    assert ungrounded_numbers("p = 1.5e-05", "p-value: 0.04") == ["1.5e-05"]
