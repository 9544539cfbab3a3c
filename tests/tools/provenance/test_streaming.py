"""A streamed answer is let through a piece at a time, each once its numbers are grounded."""

from __future__ import annotations

from backend.tools.provenance.streaming import GroundedStream

OUTPUT = "totals: {'north': 35, 'south': 30}\nmean: 21.6667\n"


def _fed(stream: GroundedStream, text: str, size: int = 3) -> list[str]:
    shown = [stream.feed(text[i : i + size]) for i in range(0, len(text), size)]
    return [piece for piece in [*shown, stream.close()] if piece]


def test_grounded_pieces_are_shown_as_soon_as_each_is_complete() -> None:
    stream = GroundedStream(OUTPUT)
    answer = "North leads the table. South has 30.\n- The mean is 21.67\n"
    shown = _fed(stream, answer)
    assert "".join(shown) == answer and not stream.withheld
    assert stream.feed("") == ""
    # The first sentence was out before the rest had arrived.
    assert shown[0] == "North leads the table. "


def test_a_number_after_a_digit_and_a_full_stop_waits_for_the_next_break() -> None:
    stream = GroundedStream(OUTPUT)
    assert stream.feed("The total is 35. ") == ""  # "35." may be "35.5": not yet a sentence end
    assert stream.feed("Next\n") == "The total is 35. Next\n"


def test_an_invented_number_stops_the_stream_and_withholds_the_rest() -> None:
    stream = GroundedStream(OUTPUT)
    shown = _fed(stream, "North leads with 35.\nWest has 12.\nSouth has 30.\n")
    assert "".join(shown) == "North leads with 35.\n"
    assert stream.withheld and stream.text == "North leads with 35.\n"
    assert stream.feed("more 35\n") == ""


def test_stop_ends_the_stream_without_calling_it_withheld() -> None:
    stream = GroundedStream(OUTPUT, stop=lambda piece, _: piece.startswith("## INPUT"))
    shown = _fed(stream, "North: 35\n## INPUT\nrepeated\n")
    assert "".join(shown) == "North: 35\n" and not stream.withheld
