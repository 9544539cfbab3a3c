"""The coder's prompts, one function per stage.

Every prompt starts with `[stage: <name>]`: the prompt log is searchable by
stage, and scripted test models pick their reply by it. Sections follow the
seeds (HISTORIES, INPUT, PLANS, REACTS, TASK, METADATA, RULES, CHECKLISTS) and
are short, because the default model has a 4k context.

A model with a long context gets a turn's prompts in another shape, built for
its server's prompt cache: the stable parts (rules, METADATA, the conversation)
go once into the turn's head (`head_system`), which every prompt of the turn
starts with, and a task is one conversation: `generate` opens it and the later
stages (`review`, `modify`, `fix`, `answer`) are short follow-ups after the code
the model wrote (`*_followup`).
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
# Not for small models: Matplotlib stays their one way to draw, and their prompts stay short.
_CHART_RULE = """
- For a chart the user may explore, prefer Plotly (plotly.express) or Altair: a figure or
  chart that is the last expression, passed to .show(), or assigned to a variable is shown
  live (hover, zoom, legend) with a PNG copy; do not save it yourself."""
_CHART_MODULES = frozenset({"altair"})

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
    head: str | None = None  # the file metadata the turn's head already carries, if it has one
    charts: bool = False  # the model is told about interactive charts (not a small model)
    sources: str = ""  # the attached data sources' tables the question needs, and their notes


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip() or '(none)'}\n"


def _history(history: list[tuple[str, str]]) -> str:
    lines = []
    for role, content in history[-10:]:
        text = content.strip().replace("\n", " ")
        lines.append(f"{role}: {text[:300]}{'…' if len(text) > 300 else ''}")
    return "\n".join(lines)


def _session(context: CodingContext) -> list[str]:
    """What earlier tasks of the session left: their variables and notepad entries."""
    parts = []
    if context.variables:
        parts.append("Variables kept from earlier runs:\n" + context.variables)
    if context.notepad:
        parts.append("Notepad (earlier tasks in this session):\n" + context.notepad)
    return parts


def _metadata(context: CodingContext) -> str:
    return "\n\n".join([context.metadata or "No data files.", *_session(context)])


def rules(charts: bool = False) -> str:
    """The coding rules; with `charts`, the interactive chart libraries too."""
    modules = ALLOWED_MODULES if charts else ALLOWED_MODULES - _CHART_MODULES
    text = _RULES.format(modules=", ".join(sorted(modules)))
    return text + _CHART_RULE if charts else text


def head_system(tools: str, files: str, charts: bool = False) -> str:
    """The system prompt of a turn's head: who the model is, its tools, the rules, the files.

    It is the same, byte for byte, for every prompt of the turn and of the
    session's later turns while the files stay the same, so the model's server
    processes it once. The session's variables and notepad grow with each task,
    so they come later, in `generate`'s own prompt, after the conversation.
    """
    return "\n".join(
        [
            SYSTEM + " You work step by step with tools, and you answer from what they found.",
            _section("TOOLS", tools),
            _section("RULES", rules(charts)),
            _section("METADATA", files),
        ]
    )


def generate(context: CodingContext) -> str:
    if context.head is not None:
        return _generate_in_turn(context)
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
            *([_section("DATA SOURCES", context.sources)] if context.sources else []),
            _section("RULES", rules(context.charts)),
            _section("CHECKLISTS", _CHECKLIST),
            "Reply with the code in one ```python block.",
        ]
    )


_SELF_CHECK = (
    "Reply with the code in one ```python block, then one line that starts with `Check:` "
    "and says whether the code answers all of INPUT (yes, or what it leaves out)."
)


def _generate_in_turn(context: CodingContext) -> str:
    """`generate` after the turn's head: only what the head does not already say."""
    files = context.metadata or "No data files."
    session = _session(context)
    return "\n".join(
        [
            "[stage: generate]",
            _section("INPUT", context.query),
            *([_section("PLANS", context.plan)] if context.plan else []),
            *([_section("REACTS", "\n\n".join(context.react))] if context.react else []),
            *([_section("METADATA", files)] if files != context.head else []),
            *([_section("SESSION", "\n\n".join(session))] if session else []),
            *([_section("DATA SOURCES", context.sources)] if context.sources else []),
            _section(
                "TASK",
                "Write one Python script that answers INPUT using the data in METADATA, "
                "following RULES.",
            ),
            _section("CHECKLISTS", _CHECKLIST),
            _SELF_CHECK,
        ]
    )


def review_followup(query: str) -> str:
    return "\n".join(
        [
            "[stage: review]",
            _section("INPUT", query),
            "Review the code above: does it answer INPUT, and does it print the answer? Judge "
            'only that, not style. Reply with JSON only: {"answers_question": true or false, '
            '"problems": ["what is missing or wrong"]}',
        ]
    )


def modify_followup(query: str, problems: list[str]) -> str:
    return "\n".join(
        [
            "[stage: modify]",
            _section("INPUT", query),
            _section("PROBLEMS", "\n".join(f"- {p}" for p in problems)),
            "Rewrite the code above so it has none of the PROBLEMS and still answers INPUT. "
            + _SELF_CHECK,
        ]
    )


def fix_followup(query: str, error: str, attempt: int, earlier: list[str]) -> str:
    """`earlier`: one line per earlier failed attempt, so a fix does not go back to one."""
    hint = _hint(error)
    return "\n".join(
        [
            "[stage: fix]",
            _section("INPUT", query),
            *([_section("REACTS", "\n".join(earlier))] if earlier else []),
            _section("ERROR", f"Attempt {attempt}, the code above, failed:\n{error[-2000:]}"),
            *([_section("HINT", hint)] if hint else []),
            "Fix the code so it runs and answers INPUT. "
            "Reply with the full corrected code in one ```python block.",
        ]
    )


def answer_followup(question: str, query: str, output: str, files: list[str], partial: bool) -> str:
    """The answer to the user's `question`, after the conversation that wrote and ran the code.

    `partial`: the model may say the run answered only part of the question, and
    the agent then goes on from its output instead.
    """
    task = f"TASK: {query}\n" if query != question else ""
    escape = (
        "If OUTPUT does not answer all of QUESTION, reply with the single word PARTIAL and "
        "nothing else.\n"
        if partial
        else ""
    )
    return "\n".join(
        [
            "[stage: answer]",
            f"QUESTION: {question}",
            f"{task}The code ran.",
            _section("OUTPUT", output[-4000:]),
            _section("FILES", "\n".join(files)),
            escape + "Answer QUESTION in markdown: the answer first, in one to three bullet "
            "points, then one follow-up question worth asking. Use only numbers that appear in "
            "OUTPUT, exactly as written there. The user sees the code, its output and the "
            "plots already: do not repeat them. If QUESTION says in what format to give the "
            "answer, give it in that format too.",
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
            _section("RULES", rules(context.charts)),
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
            _section("RULES", rules(context.charts)),
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
            "Use only numbers that appear in OUTPUT, exactly as written there. If INPUT says "
            "in what format to give the answer, give it in that format too.",
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
