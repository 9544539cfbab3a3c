"""Provenance: where each number of an answer came from, and whether it may be stated.

An answer's *claims* are the numbers it states about the data (`numbers.claims`: not
list markers, link targets, file names, citation marks or code). Two readers use them:

- `grounding.ungrounded_numbers`, the check before an answer is shown: every claim
  must round from a number a run printed, or the answer is rebuilt from the output;
- `trace.cite`, the citations shown with an answer: each claim is traced to the run
  and output line that printed it, to the question, or to a document passage.

It reads text only, so it stands below python_coder and the agents that use it, and
imports nothing from the other tools.
"""

from __future__ import annotations

from backend.tools.provenance.grounding import ungrounded_numbers
from backend.tools.provenance.trace import Passage, RunOutput, cite

__all__ = ["Passage", "RunOutput", "cite", "ungrounded_numbers"]
