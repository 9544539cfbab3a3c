"""Token log-probabilities from llama.cpp, without `logits_all`.

llama-cpp-python reports logprobs only for a model loaded with `logits_all`,
which keeps a row of logits per context position: n_ctx x n_vocab floats, about
800 MB for SmolLM2 at 4096 tokens. A logits processor sees the one row that the
next token is sampled from, which is all OpenAI's `logprobs` needs. The token
chosen from a row shows up as the last input id at the next call, so each
token's entry is complete one step later; `Llama.generate` never evaluates the
last token, so `finish` finds it from the text that is left.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


class TokenLogprobs:
    """A llama.cpp logits processor recording OpenAI `logprobs` entries as it goes."""

    def __init__(self, llama: Any, top: int = 0) -> None:
        self.llama = llama
        self.top = top
        self.entries: list[dict[str, Any]] = []
        self._pending: npt.NDArray[np.float32] | None = None  # the row of the unresolved token
        self._taken = 0

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        if self._pending is not None and len(input_ids):
            self._resolve(int(input_ids[-1]))
        shifted = scores - scores.max()
        self._pending = shifted - np.log(np.exp(shifted).sum())
        return scores

    def take(self) -> list[dict[str, Any]]:
        """The entries completed since the last call."""
        taken, self._taken = self.entries[self._taken :], len(self.entries)
        return taken

    def finish(self, text: str) -> list[dict[str, Any]]:
        """Resolve the last token from `text`, the answer's text not covered yet."""
        covered = "".join(entry["token"] for entry in self.entries[self._taken :])
        rest = text[len(covered) :] if text.startswith(covered) else ""
        if self._pending is not None and rest:
            ids = self.llama.tokenize(rest.encode(), add_bos=False, special=False)
            if len(ids) == 1:
                self._resolve(ids[0])
        self._pending = None
        return self.take()

    def _resolve(self, token_id: int) -> None:
        row = self._pending
        assert row is not None
        self._pending = None
        entry = self._entry(token_id, row)
        if self.top:
            best = np.argpartition(row, -self.top)[-self.top :]
            ranked = sorted(best.tolist(), key=lambda i: -float(row[i]))
            entry["top_logprobs"] = [self._entry(i, row) for i in ranked]
        else:
            entry["top_logprobs"] = []
        self.entries.append(entry)

    def _entry(self, token_id: int, row: npt.NDArray[np.float32]) -> dict[str, Any]:
        raw = self.llama.detokenize([token_id])
        return {
            "token": raw.decode("utf-8", errors="replace"),
            "logprob": float(row[token_id]),
            "bytes": list(raw),
        }
