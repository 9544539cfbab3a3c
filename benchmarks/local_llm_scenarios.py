"""The questions `local_llm_cost.py` asks, and the scripted model that answers them.

Ten turns over the DABench sample's tables (../shared/dabench-sample): one-step
questions (two of them with trivial code, at most 3 top-level statements),
three-step questions, and one session of a question and two follow-ups. Each
step has its goal and real pandas code for the table (loaded by the server as
`df1`) that prints labelled results, so an output line names its step.

The model (`reply`) answers like an honest model that follows the prompt. It
reads the stage from `[stage: NAME]` at the start of the last user message and
everything else from the messages themselves, never from state of its own:

- `react`: the next step's goal as the Action Input (a one-step question's goal
  is the question itself), counting the `Observation:` blocks after the
  question; then `Final Answer:` with the answer.
- `plan`: the question's steps as JSON; `replan`: continue.
- `generate` (and `fix`, `modify`): the code of the step whose goal (or of the
  question whose text) the prompt gives as its task, with a `Check:` line after
  it when the prompt asks for one. `review`: approve.
- `answer`, `final`: the answer. `PARTIAL` instead when the prompt says to reply
  so if the output does not answer all of the question, and the output of some
  step of a multi-step question is missing.
- No stage, with `tools` (the benchmark's own function-calling floor): a call of
  the `python` tool with all of the question's code; after the tool's result,
  the answer.

Every answer comes from one builder: the labelled result lines found in the
prompt, quoted as they were printed (the server drops an answer whose numbers
the output does not show), under **Key findings**, then **Next steps**.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from benchmarks.simulated_llamacpp import Reply, content_text

_STAGE = re.compile(r"\[stage:\s*([\w-]+)\]")
_OBSERVATION = re.compile(r"(?m)^\s*Observation:")
_LABEL = re.compile(r"""print\(\s*["']([^"']+)["']""")
_PARTIAL = re.compile(r"\bPARTIAL\b")
_LABEL_ONLY = re.compile(r"(?:#+\s*)?[\w ]{1,24}:")  # "Question:", "INPUT:", "user:"
# The stages the server is expected to ask for, and the floor's two calls.
KNOWN_STAGES = frozenset(
    {"react", "plan", "replan", "final", "generate", "review", "answer", "fc_call", "fc_answer"}
)


@dataclass(frozen=True)
class Step:
    goal: str
    code: str

    @property
    def labels(self) -> tuple[str, ...]:
        """How each result line the code prints starts."""
        return tuple(_LABEL.findall(self.code))


@dataclass(frozen=True)
class Scenario:
    key: str
    file: str
    question: str
    steps: tuple[Step, ...]
    next_step: str  # the follow-up question its answers suggest
    follows: str = ""  # the key of the turn it follows in the same session

    @property
    def code(self) -> str:
        return "\n".join(step.code for step in self.steps)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for step in self.steps for label in step.labels)

    @property
    def trivial(self) -> bool:
        """Code of at most 3 top-level statements (python_coder skips its review)."""
        return len(self.steps) == 1 and len(ast.parse(self.code).body) <= 3


def one_step(key: str, file: str, question: str, code: str, next_step: str, **kw: str) -> Scenario:
    return Scenario(key, file, question, (Step(question, code),), next_step, **kw)


CASES = "estimated_numbers.csv"
ORBIT = "DES=+2006261.csv"
TITANIC = "titanic_test.csv"
SCENARIOS: tuple[Scenario, ...] = (
    one_step(
        "cases-mean",
        CASES,
        "What is the mean number of malaria cases recorded across all countries and years?",
        "import pandas as pd\n"
        'raw = df1["No. of cases"].astype(str).str.extract(r"^\\s*(\\d+)")[0]\n'
        'cases = pd.to_numeric(raw, errors="coerce").dropna().astype("Int64")\n'
        "mean_cases = float(cases.mean())\n"
        'print("country-years with cases:", len(cases))\n'
        'print("mean cases:", round(mean_cases))\n',
        "Which region has the most cases?",
    ),
    one_step(
        "orbit-xy",
        ORBIT,
        "Is there any correlation between the X and Y coordinates, and what is its Pearson "
        "coefficient?",
        'r = df1["X"].corr(df1["Y"])\nprint("X-Y pearson r:", round(r, 3))\n',
        "How do X and Z relate?",
    ),
    one_step(
        "cases-deaths",
        CASES,
        "Is there a correlation between the number of malaria cases and the number of deaths?",
        "import pandas as pd\n"
        'cases = df1["No. of cases"].astype(str).str.extract(r"^\\s*(\\d+)")[0]\n'
        'deaths = df1["No. of deaths"].astype(str).str.extract(r"^\\s*(\\d+)")[0]\n'
        'pairs = pd.DataFrame({"cases": pd.to_numeric(cases, errors="coerce"),\n'
        '                      "deaths": pd.to_numeric(deaths, errors="coerce")}).dropna()\n'
        'r = pairs["cases"].corr(pairs["deaths"])\n'
        'print("country-years compared:", len(pairs))\n'
        'print("cases-deaths pearson r:", round(r, 2))\n',
        "Does the relationship hold within each region?",
    ),
    one_step(
        "agents-wait",
        "20170413_000000_group_statistics.csv",
        "Examine the correlation between the average number of agents talking and the "
        "average waiting time for callers.",
        "import pandas as pd\n"
        "df1.columns = df1.columns.str.strip()\n"
        'talking = pd.to_numeric(df1["avg. num. agents talking"], errors="coerce")\n'
        'wait = pd.to_timedelta(df1["avg. wait time"].astype(str).str.strip())\n'
        "r = talking.corr(wait.dt.total_seconds())\n"
        'print("intervals:", len(df1))\n'
        'print("agents talking vs wait seconds pearson r:", round(r, 3))\n',
        "How does the waiting time change over the day?",
    ),
    Scenario(
        "volatility",
        "bitconnect_price.csv",
        "Create a Volatility feature as (High - Low) / Open, find its Pearson correlation "
        "with the trading volume, and say whether the relationship is positive, negative "
        "or none.",
        (
            Step(
                "Compute Volatility = (High - Low) / Open for every day and report its mean",
                'volatility = (df1["High"] - df1["Low"]) / df1["Open"]\n'
                'print("days:", len(volatility))\n'
                'print("mean volatility:", round(volatility.mean(), 4))\n',
            ),
            Step(
                "Correlate Volatility with the trading Volume (Pearson r)",
                "import pandas as pd\n"
                'volume = pd.to_numeric(df1["Volume"].astype(str).str.replace(",", ""),\n'
                '                       errors="coerce")\n'
                'volatility = (df1["High"] - df1["Low"]) / df1["Open"]\n'
                "r = volatility.corr(volume)\n"
                'print("volatility-volume pearson r:", round(r, 2))\n',
            ),
            Step(
                "Classify the Volatility-Volume relationship as positive, negative or none "
                "(cut-off at an absolute r of one half)",
                "import pandas as pd\n"
                'volume = pd.to_numeric(df1["Volume"].astype(str).str.replace(",", ""),\n'
                '                       errors="coerce")\n'
                'r = ((df1["High"] - df1["Low"]) / df1["Open"]).corr(volume)\n'
                'kind = "positive" if r >= 0.5 else "negative" if r <= -0.5 else "none"\n'
                'print("volatility-volume relationship:", kind)\n',
            ),
        ),
        "Is volatility higher on days with a large price drop?",
    ),
    Scenario(
        "scores-log",
        "imp.score.ldlr.metabolome.csv",
        "Test whether importance.score is normally distributed (Shapiro-Wilk), log-transform "
        "it if it is not, and give the mean and standard deviation of the transformed scores.",
        (
            Step(
                "Run a Shapiro-Wilk normality test on importance.score",
                "from scipy import stats\n"
                'w, p = stats.shapiro(df1["importance.score"].dropna())\n'
                'print("shapiro-wilk W:", round(w, 4))\n'
                'print("shapiro-wilk p-value:", round(p, 4))\n',
            ),
            Step(
                "Apply a natural log transformation to importance.score",
                "import numpy as np\n"
                'scores = df1["importance.score"].dropna()\n'
                "logged = np.log(scores[scores > 0])\n"
                'print("log-transformed scores:", len(logged))\n'
                'print("smallest log score:", round(logged.min(), 2))\n',
            ),
            Step(
                "Report the mean and standard deviation of the log-transformed importance.score",
                "import numpy as np\n"
                'scores = df1["importance.score"].dropna()\n'
                "logged = np.log(scores[scores > 0])\n"
                'print("log score mean:", round(logged.mean(), 2))\n'
                'print("log score std:", round(logged.std(), 2))\n',
            ),
        ),
        "Which features have the highest importance scores?",
    ),
    Scenario(
        "x-outliers",
        ORBIT,
        "Find outliers in the X coordinate with the Z-score method (beyond three standard "
        "deviations), remove them, and give the new mean and standard deviation of X.",
        (
            Step(
                "Compute Z-scores of X and count the outliers beyond three standard deviations",
                'z = (df1["X"] - df1["X"].mean()) / df1["X"].std()\n'
                'print("X outliers beyond three sd:", int((z.abs() > 3).sum()))\n',
            ),
            Step(
                "Remove the X outliers and report how many rows remain",
                'z = (df1["X"] - df1["X"].mean()) / df1["X"].std()\n'
                "kept = df1[z.abs() <= 3]\n"
                'print("rows before removing X outliers:", len(df1))\n'
                'print("rows after removing X outliers:", len(kept))\n',
            ),
            Step(
                "Compute the new mean and standard deviation of X without the outliers",
                'z = (df1["X"] - df1["X"].mean()) / df1["X"].std()\n'
                'kept = df1.loc[z.abs() <= 3, "X"]\n'
                'print("new X mean:", round(kept.mean(), 2))\n'
                'print("new X std:", round(kept.std(), 2))\n',
            ),
        ),
        "Does Y have outliers too?",
    ),
    one_step(
        "age-fare",
        TITANIC,
        "Is there a correlation between the age of the passengers and the fare they paid?",
        'pairs = df1[["Age", "Fare"]].dropna()\n'
        'print("passengers with age and fare:", len(pairs))\n'
        'print("age-fare pearson r:", round(pairs["Age"].corr(pairs["Fare"]), 2))\n',
        "How does it differ between men and women?",
    ),
    one_step(
        "age-fare-male",
        TITANIC,
        "How does that correlation look for male passengers only?",
        "from scipy import stats\n"
        'male = df1[df1["Sex"] == "male"][["Age", "Fare"]].dropna()\n'
        'r, p = stats.pearsonr(male["Age"], male["Fare"])\n'
        'print("male passengers:", len(male))\n'
        'print("male age-fare pearson r:", round(r, 2))\n'
        'print("male age-fare p-value:", round(p, 4))\n',
        "And for female passengers?",
        follows="age-fare",
    ),
    one_step(
        "age-fare-female",
        TITANIC,
        "And among the female passengers?",
        "from scipy import stats\n"
        'female = df1[df1["Sex"] == "female"][["Age", "Fare"]].dropna()\n'
        'r, p = stats.pearsonr(female["Age"], female["Fare"])\n'
        'print("female passengers:", len(female))\n'
        'print("female age-fare pearson r:", round(r, 2))\n'
        'print("female age-fare p-value:", round(p, 4))\n',
        "Does the passenger class explain the difference?",
        follows="age-fare-male",
    ),
)
_QUESTIONS = {scenario.question: scenario for scenario in SCENARIOS}
# The session of a question and its follow-ups, in order.
SESSION = ("age-fare", "age-fare-male", "age-fare-female")
_GOALS = {step.goal: (scenario, step) for scenario in SCENARIOS for step in scenario.steps}


def _check_texts() -> None:
    """Each question and goal is found in a prompt by its text: none may hold another,
    nor be part of a suggested next step (answers bring those into later prompts)."""
    texts = [*_QUESTIONS, *(goal for goal in _GOALS if goal not in _QUESTIONS)]
    others = [*texts, *(scenario.next_step for scenario in SCENARIOS)]
    for text in texts:
        inside = [other for other in others if other != text and text in other]
        if inside:
            raise ValueError(f"{text!r} is part of {inside[0]!r}")


_check_texts()


def stage_of(messages: list[dict[str, Any]]) -> str:
    """`NAME` of `[stage: NAME]` in the last user message; "" when it has none."""
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return ""
    text = content_text(users[-1].get("content"))
    found = _STAGE.match(text.lstrip()) or _STAGE.search(text)
    return found.group(1) if found else ""


def _named_last(text: str, candidates: list[str]) -> str | None:
    """The candidate that a line of `text` names last: a line that is the candidate, or
    `Label: candidate`, or the plan's line of the current step (`→ 2. goal ...`); else
    the one that occurs last."""
    lines = [line.strip() for line in text.splitlines()]
    named: dict[str, int] = {}
    for index, line in enumerate(lines):
        for candidate in candidates:
            if candidate not in line:
                continue
            label = line.removesuffix(candidate).rstrip()
            given = line.endswith(candidate) and (not label or _LABEL_ONLY.fullmatch(label))
            if given or line.startswith("→"):
                named[candidate] = index
    if named:
        return max(named, key=lambda candidate: named[candidate])
    found = [(text.rfind(c), c) for c in candidates if c in text]
    return max(found)[1] if found else None


def current_question(text: str) -> Scenario | None:
    """The question asked last in the prompt (earlier turns come before it)."""
    question = _named_last(text, list(_QUESTIONS))
    return _QUESTIONS[question] if question else None


def current_task(text: str) -> tuple[Scenario, tuple[Step, ...]] | None:
    """The task the prompt gives: the step of a multi-step question named last, else
    the question named last (a one-step question's goal is the question)."""
    goal = _named_last(text, [goal for goal in _GOALS if goal not in _QUESTIONS])
    if goal is not None:
        owner, step = _GOALS[goal]
        return owner, (step,)
    scenario = current_question(text)
    return None if scenario is None else (scenario, scenario.steps)


def result_lines(text: str, labels: tuple[str, ...]) -> list[str]:
    """The last line of the prompt that starts with each label."""
    lines = [line.strip() for line in text.splitlines()]
    found = []
    for label in labels:
        matching = [line for line in lines if line.startswith(label)]
        if matching:
            found.append(matching[-1])
    return found


def write_answer(text: str, labels: tuple[str, ...], next_step: str) -> str:
    findings = result_lines(text, labels) or ["The output does not show the result."]
    bullets = "\n".join(f"- {line}" for line in findings)
    return f"**Key findings**\n{bullets}\n**Next steps**\n- {next_step}"


def _answer(stage: str, text: str, scenario: Scenario, steps: tuple[Step, ...]) -> Reply:
    labels = tuple(label for step in steps for label in step.labels)
    return Reply(stage, write_answer(text, labels, scenario.next_step), answer=True)


def _code(text: str, steps: tuple[Step, ...], asks_check: bool) -> str:
    code = "\n".join(step.code for step in steps)
    check = "\nCheck: yes, it prints each result with a label." if asks_check else ""
    return f"```python\n{code}```{check}"


def _react(stage: str, text: str) -> Reply:
    scenario = current_question(text)
    if scenario is None:
        return Reply(stage, "Thought: I cannot tell what was asked.\nFinal Answer: Unclear.")
    done = len(_OBSERVATION.findall(text, text.find(scenario.question)))
    if done < len(scenario.steps):
        goal = scenario.steps[done].goal
        thought = "I need to run code on the data" if done == 0 else "Next step"
        return Reply(stage, f"Thought: {thought}\nAction: python_coder\nAction Input: {goal}")
    answer = write_answer(text, scenario.labels, scenario.next_step)
    return Reply(stage, f"Thought: I know the answer\nFinal Answer: {answer}", answer=True)


def reply(messages: list[dict[str, Any]], has_tools: bool) -> Reply:
    """The scripted model's reply to a request (see the module's docstring)."""
    stage = stage_of(messages)
    text = "\n".join(content_text(m.get("content")) for m in messages)
    last_user = next(
        (content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
        "",
    )
    if stage == "react":
        return _react(stage, text)
    if stage == "plan":
        scenario = current_question(text)
        steps = scenario.steps if scenario else ()
        plan = [
            {"goal": s.goal, "tool": "python_coder", "success_criterion": "its result is printed"}
            for s in steps
        ]
        return Reply(stage, json.dumps({"steps": plan}))
    if stage == "replan":
        return Reply(stage, json.dumps({"decision": "continue", "steps": [], "reason": "on track"}))
    if stage == "review":
        return Reply(stage, json.dumps({"answers_question": True, "problems": []}))
    if stage in ("generate", "fix", "modify"):
        task = current_task(text)
        if task is None:
            return Reply(stage, "```python\nprint('no task found')\n```")
        return Reply(stage, _code(text, task[1], "Check:" in last_user))
    if stage == "final":
        scenario = current_question(text)
        if scenario is None:
            return Reply(stage, "I cannot tell what was asked.", answer=True)
        return _answer(stage, text, scenario, scenario.steps)
    if stage == "answer":
        task = current_task(text)
        if task is None:
            return Reply(stage, "I cannot tell what was asked.", answer=True)
        scenario, steps = task
        missing = [step for step in scenario.steps if not result_lines(text, step.labels)]
        whole = len(scenario.steps) > 1 and scenario.question in text
        if whole and missing and _PARTIAL.search(last_user):
            return Reply(stage, "PARTIAL")
        return _answer(stage, text, scenario, steps)
    if not stage and has_tools:
        return _function_calling(messages, text)
    return Reply(stage or "none", "OK.")


def _function_calling(messages: list[dict[str, Any]], text: str) -> Reply:
    """The floor: a `python` tool call with the question's code, then the answer."""
    scenario = current_question(text)
    if scenario is None:
        return Reply("fc_call", "I cannot tell what was asked.")
    if messages[-1].get("role") == "tool":
        return _answer("fc_answer", text, scenario, scenario.steps)
    return Reply("fc_call", tool_call=("python", json.dumps({"code": scenario.code})))
