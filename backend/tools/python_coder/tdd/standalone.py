"""The TDD tests as a program of their own, for a session's export.

It runs each case against the functions defined before it, with the same
comparison as the sandbox harness (`compare.py`'s source), prints how many
passed and fails on the first run that does not hold. Everything it needs
lives inside one function, so only the functions under test are left behind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from backend.tools.python_coder.tdd.harness import compare_source, indent_code
from backend.tools.python_coder.tdd.models import TestCase

_RUN = """
    def passes(case):
        function = globals()[case["function"]]
        inputs = decode_value(case.get("inputs") or {})
        wanted = case.get("expect_error")
        if not wanted:
            return values_equal(function(**inputs), decode_value(case.get("expected")))
        try:
            function(**inputs)
        except Exception as exc:
            return wanted in [kind.__name__ for kind in type(exc).mro()]
        return False

    failed = [case.get("description") or case["function"] for case in cases if not passes(case)]
    print(len(cases) - len(failed), "of", len(cases), "tests passed")
    assert not failed, f"failing tests: {failed}"
"""


def standalone_tests(cases: Sequence[TestCase]) -> str:
    cases_json = json.dumps([case.model_dump() for case in cases], indent=1)
    return "\n".join(
        [
            "def run_tests():",
            "    import json",
            "",
            *indent_code(compare_source(), "    ").splitlines(),
            "",
            f"    cases = json.loads({cases_json!r})",
            *_RUN.splitlines(),
            "",
            "",
            "run_tests()",
            "",
        ]
    )
