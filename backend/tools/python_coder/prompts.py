"""The coder's prompts, one function per stage.

Every prompt starts with `[stage: <name>]`: the prompt log is searchable by
stage, and scripted test models pick their reply by it. Sections follow the
seeds (HISTORIES, INPUT, PLANS, REACTS, TASK, METADATA, RULES, CHECKLISTS) and
are short, because the default model has a 4k context.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.tools.sandbox.ast_check import ALLOWED_MODULES

SYSTEM = (
    "You are an expert Python data analyst. You write short, correct Python code that "
    "answers questions about data files, and you print every result."
)

_RULES = """- The working directory is the session workspace. Uploaded files are under uploads/.
- Variables listed in METADATA already exist: use them, do not load those files again.
- print() every result with a label, e.g. print("mean price:", value).
- Matplotlib figures are saved automatically to outputs/; call plt.savefig only for a
  specific name under outputs/.
- No network, no subprocess, no input(), no files outside the workspace.
- Allowed imports: {modules}."""

_CHECKLIST = """- [ ] Uses the exact file paths, variable names and column names from METADATA.
- [ ] Answers the whole INPUT, not only part of it.
- [ ] Prints the final answer."""


@dataclass
class CodingContext:
    """Everything the generation prompt may draw on."""

    query: str
    history: list[tuple[str, str]] = field(default_factory=list)
    plan: str = ""
    react: list[str] = field(default_factory=list)
    metadata: str = ""
    variables: str = ""
    notepad: str = ""


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip() or '(none)'}\n"


def _history(history: list[tuple[str, str]]) -> str:
    lines = []
    for role, content in history[-10:]:
        text = content.strip().replace("\n", " ")
        lines.append(f"{role}: {text[:300]}{'…' if len(text) > 300 else ''}")
    return "\n".join(lines)


def _metadata(context: CodingContext) -> str:
    parts = [context.metadata or "No data files."]
    if context.variables:
        parts.append("Variables kept from earlier runs:\n" + context.variables)
    if context.notepad:
        parts.append("Notepad (earlier tasks in this session):\n" + context.notepad)
    return "\n\n".join(parts)


def rules() -> str:
    return _RULES.format(modules=", ".join(sorted(ALLOWED_MODULES)))


def generate(context: CodingContext) -> str:
    return "\n".join(
        [
            "[stage: generate]",
            _section("HISTORIES", _history(context.history)),
            _section("INPUT", context.query),
            _section("PLANS", context.plan),
            _section("REACTS", "\n\n".join(context.react)),
            _section(
                "TASK",
                "Write one Python script that answers INPUT using the data in METADATA.",
            ),
            _section("METADATA", _metadata(context)),
            _section("RULES", rules()),
            _section("CHECKLISTS", _CHECKLIST),
            "Reply with the code in one ```python block.",
        ]
    )


def modify(context: CodingContext, code: str, problems: list[str]) -> str:
    return "\n".join(
        [
            "[stage: modify]",
            _section("INPUT", context.query),
            _section("METADATA", _metadata(context)),
            _section("CODE", f"```python\n{code}```"),
            _section("PROBLEMS", "\n".join(f"- {p}" for p in problems)),
            _section("RULES", rules()),
            "Rewrite the code so it has none of the PROBLEMS and still answers INPUT. "
            "Reply with the full code in one ```python block.",
        ]
    )


def review(context: CodingContext, code: str) -> str:
    return "\n".join(
        [
            "[stage: review]",
            _section("INPUT", context.query),
            _section("METADATA", context.metadata),
            _section("CODE", f"```python\n{code}```"),
            "Does this code answer INPUT, and does it print the answer? Judge only that, not "
            "style. Reply with JSON: "
            '{"answers_question": true or false, "problems": ["what is missing or wrong"]}',
        ]
    )


def _hint(error: str) -> str:
    """Advice for errors small models make again and again."""
    if "FileNotFoundError" in error:
        return (
            "The data files are already loaded into the variables named in METADATA "
            "(`-> df1`): use those variables instead of reading files. Other files are "
            "under uploads/."
        )
    if "NameError" in error:
        return "Use only variables defined in the code or listed in METADATA."
    return ""


def fix(
    context: CodingContext, code: str, error: str, attempt: int, earlier: list[str] | None = None
) -> str:
    """`earlier`: one line per earlier failed attempt, so a fix does not go back to one."""
    hint = _hint(error)
    return "\n".join(
        [
            "[stage: fix]",
            _section("INPUT", context.query),
            _section("REACTS", "\n".join([*context.react, *(earlier or [])])),
            _section("METADATA", _metadata(context)),
            _section("CODE", f"```python\n{code}```"),
            _section("ERROR", f"Attempt {attempt} failed:\n{error[-2000:]}"),
            *([_section("HINT", hint)] if hint else []),
            _section("RULES", rules()),
            "Fix the code so it runs and answers INPUT. "
            "Reply with the full corrected code in one ```python block.",
        ]
    )


def answer(query: str, output: str, files: list[str]) -> str:
    return "\n".join(
        [
            "[stage: answer]",
            _section("INPUT", query),
            _section("OUTPUT", output[-4000:]),
            _section("FILES", "\n".join(files)),
            "Write the answer in markdown with these parts:\n"
            "**Key findings**: answer INPUT in one to three bullet points.\n"
            "**Plots**: each file in FILES as ![name](path), if there are any.\n"
            "**Next steps**: one or two follow-up questions worth asking.\n"
            "Use only numbers that appear in OUTPUT, exactly as written there.",
        ]
    )


def select_files(query: str, candidates: str, limit: int) -> str:
    return "\n".join(
        [
            "[stage: select_files]",
            _section("INPUT", query),
            _section("FILES", candidates),
            f"Pick at most {limit} files from FILES that are needed to answer INPUT. Reply with "
            'JSON: {"files": [{"name": "exact file name", "reason": "why it is needed"}]}',
        ]
    )
