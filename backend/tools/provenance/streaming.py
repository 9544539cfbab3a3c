"""Let an answer through as the model writes it, a piece at a time, once each is grounded.

A piece ends at a line break, or at the end of a sentence (". " after a word, never
after a digit: "20.0. " waits for the next break). Each piece is checked on its own
before it is released: one that states a number the evidence does not show stops
the stream there, and it and everything after it are withheld. What was released
stays true; the caller closes the answer from the evidence instead. `stop` may end
the stream early too (a small model that starts repeating its prompt).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from backend.tools.provenance.grounding import ungrounded_numbers

_PIECE_END = re.compile(r"\n|(?<=[^\d\s][.!?])[ \t]")


class GroundedStream:
    def __init__(
        self,
        evidence: str,
        files: Sequence[str] = (),
        stop: Callable[[str, list[str]], bool] | None = None,
    ) -> None:
        self.evidence = evidence
        self.files = files
        self.stop = stop  # (piece, the pieces released so far) -> end the stream here
        self.released: list[str] = []
        self.withheld = False  # a piece stated a number the evidence does not show
        self.ended = False
        self._buffer = ""

    @property
    def text(self) -> str:
        return "".join(self.released)

    def feed(self, text: str) -> str:
        """What of the answer so far may be shown now (complete, grounded pieces)."""
        if self.ended:
            return ""
        self._buffer += text
        shown = []
        while not self.ended and (end := _PIECE_END.search(self._buffer)) is not None:
            piece, self._buffer = self._buffer[: end.end()], self._buffer[end.end() :]
            if self._take(piece):
                shown.append(piece)
        return "".join(shown)

    def close(self) -> str:
        """The last piece, once the model has finished, if it may be shown."""
        piece, self._buffer = self._buffer, ""
        if piece.strip() and not self.ended and self._take(piece):
            return piece
        return ""

    def _take(self, piece: str) -> bool:
        if self.stop is not None and self.stop(piece, self.released):
            self.ended = True
            return False
        if ungrounded_numbers(piece, self.evidence, self.files):
            self.withheld = self.ended = True
            return False
        self.released.append(piece)
        return True
