"""What the scripted model answers in the UI tests: each test tags its messages."""

from __future__ import annotations

import json
from typing import Any

from tests.support.agent_script import CODE, react_turn, slow_turn
from tests.support.table_script import table_turn, variables_turn

XSS_FLAG = "__xss"

# Hostile strings for model output, file names and column names: none may run script.
XSS_MARKDOWN = "\n\n".join(
    [
        "XSS-CORPUS answer follows.",
        f"<script>window.{XSS_FLAG}=1</script>",
        f'<img src=x onerror="window.{XSS_FLAG}=2">',
        f"[click me](javascript:window.{XSS_FLAG}=3)",
        f"[data link](data:text/html,<script>window.{XSS_FLAG}=4</script>)",
        f'<svg onload="window.{XSS_FLAG}=5"><script>window.{XSS_FLAG}=6</script></svg>',
        f"![pic](javascript:window.{XSS_FLAG}=7)",
        f'[tricky](<javascript:window.{XSS_FLAG}=8> "t")',
        f"[entity](&#106;avascript:window.{XSS_FLAG}=9)",
        f'<a href="javascript:window.{XSS_FLAG}=10">raw anchor</a>',
        f"```html\n<script>window.{XSS_FLAG}=11</script>\n```",
        f"`<img src=x onerror=window.{XSS_FLAG}=12>`",
        f"[![img link](x)](javascript:window.{XSS_FLAG}=15)",
        f'<https://example.org/"onmouseover="window.{XSS_FLAG}=16>',
        "A fine link: [docs](https://example.org/docs).",
    ]
)
XSS_COLUMN = f"<img src=x onerror=window.{XSS_FLAG}=13>"
XSS_FILE_NAME = f"<svg onload=window.{XSS_FLAG}=14>.csv"

REACT_CODE = CODE + "df1.describe().to_csv('summary.csv')\n"
# Streamed slowly enough (120 tokens, 50 ms apart) to be seen with its fence still open.
FENCE = (
    "Here is the code:\n\n```python\n"
    + "".join(f"x{i} = {i}\n" for i in range(40))
    + "```\n\nDone."
)
MATH = "Prices were $5 and $10 today, and \\(x^2\\) grows."
LONG_OUTPUT_CODE = "for i in range(45):\n    print('line', i)\n"
# One 400-character word, in the code, its output and the tool's input: none may widen the page.
WIDE_WORD = "w" * 400
WIDE_CODE = f"print('{WIDE_WORD}')\n"
# Runs until the test uploads go.csv (an event it controls, never a guessed delay).
REATTACH_CODE = (
    "import pathlib, time\n"
    "for _ in range(1200):\n"
    "    if pathlib.Path('uploads/go.csv').exists():\n"
    "        break\n"
    "    time.sleep(0.05)\n"
    "print('mean price:', df1['price'].mean())\n"
)

# Issue 27: a Plotly figure (shown with .show()) and an Altair chart (a variable) in one run.
CHART_CODE = (
    "import altair as alt\nimport plotly.express as px\n"
    "fig = px.scatter(df1, x='region', y='price', color='region', title='Prices by region')\n"
    "fig.show()\n"
    "bars = alt.Chart(df1).mark_bar().encode(x='region', y='price', tooltip=['region', 'price'])\n"
    "print('regions:', len(df1))\n"
)

# Plotly draws a heatmap as an <image> of a data: URL, which its sandboxed frame allows.
HEATMAP_CODE = (
    "import plotly.graph_objects as go\n"
    "fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], x=['a', 'b'], y=['c', 'd']))\n"
    "fig.show()\n"
    "print('cells:', 4)\n"
)


# Issue 14: an answer with computed numbers (a sentence, a table, a list), one from the
# question ("2", printed too, as the answer may only state printed numbers) and one no
# line can vouch for ("7": printed, but among unrelated ids).
CITE_CODE = (
    "print(df1.groupby('region')['price'].sum().to_string())\n"
    "print('mean price:', df1['price'].mean())\n"
    "print('regions:', df1['region'].nunique())\n"
    "print('ids:', 7, 9, 11)\n"
)
CITE_ANSWER = (
    "The mean price of the 2 regions is **20.0**, and 7 is lucky.\n\n"
    "| Region | Total |\n|---|---|\n| north | 10 |\n| south | 30 |\n\n"
    "- North: 10\n- South: 30\n"
)

# Issue 43: a query on the data source "shop" the test attached (each test user has their own).
DATA_SOURCE_CODE = (
    "df = sql('shop', 'SELECT name FROM customers ORDER BY id')\n"
    "print('customers:', ', '.join(df['name']))\n"
)


PLAN = {
    "steps": [
        {"goal": "see which files there are", "tool": "list_files", "success_criterion": "listed"},
        {"goal": "Q-UI-PLAN mean price", "tool": "python_coder", "success_criterion": "a number"},
    ]
}


def plan_turn() -> list[dict[str, Any]]:
    """A Plan-and-Execute turn: list the files, compute with python_coder, answer."""
    tag = "Q-UI-PLAN"
    return [
        {"when": ["[stage: plan]", tag], "content": json.dumps(PLAN)},
        {"when": ["[stage: replan]", tag], "content": '{"decision": "continue"}', "repeat": True},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{CODE}```"},
        {"when": ["[stage: answer]", tag], "content": "The mean price is 20.0."},
        {"when": ["[stage: final]", tag], "content": "The mean price is 20.0."},
    ]


def retried_turn() -> list[dict[str, Any]]:
    """A ReAct turn whose first code fails; the fixed second attempt works."""
    tag = "Q-UI-FIX"
    broken = "print('mean price:', df1['cost'].mean())\n"
    return [  # the first matching reply wins: the broken code comes first
        {"when": ["[stage: generate]", tag], "content": f"```python\n{broken}```"},
        {"when": ["[stage: fix]", tag], "content": f"```python\n{CODE}```"},
        *react_turn(tag),
    ]


def wide_turn() -> list[dict[str, Any]]:
    """A ReAct turn whose tool input, code, output and answer each hold one 400-character word."""
    tag = "Q-UI-WIDE"
    answer = f"It printed one long line:\n\n```text\n{WIDE_WORD}\n```\n"
    action = f"Action: coder\nAction Input: {tag} {WIDE_WORD}"
    return [
        {"when": ["[stage: react]", tag], "content": action},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{WIDE_CODE}```"},
        {"when": ["[stage: answer]", tag], "content": answer},
        {"when": ["[stage: react]", tag], "content": f"Final Answer: {answer}"},
    ]


# Issue 27, branches: each turn's code, by tag; SIX is regenerated, so it is there twice.
BRANCH_CODE = {
    "Q-UI-BR-ONE": "x = 1\nprint('x is', x)\n",
    "Q-UI-BR-TWO": "x = 2\nprint('x is', x)\n",
    "Q-UI-BR-THREE": "print('x is', x)\n",
    "Q-UI-BR-FIVE": "x = 5\nprint('x is', x)\n",
    "Q-UI-BR-FOUR": "print('x is', x)\n",
    "Q-UI-BR-SIX": "print('x is', x)\n",
}


def branch_turns() -> list[dict[str, Any]]:
    turns = [*BRANCH_CODE.items(), ("Q-UI-BR-SIX", BRANCH_CODE["Q-UI-BR-SIX"])]
    return [r for tag, code in turns for r in react_turn(tag, code, f"{tag} done.")]


def replies() -> list[dict[str, Any]]:
    return [
        *branch_turns(),
        *react_turn("Q-UI-REACT", code=REACT_CODE),
        # Four statements are worth a review (fewer are "trivial"): it approves.
        {"when": ["[stage: review]", "Q-UI-REACT"], "content": '{"answers_question": true}'},
        *slow_turn("Q-UI-STOP"),
        *react_turn("Q-UI-AFTER-STOP"),
        *(reply for t in "ABC" for reply in react_turn(f"Q-UI-CITE-{t}", CITE_CODE, CITE_ANSWER)),
        {
            "when": ["[stage: review]", "Q-UI-CITE"],
            "content": '{"answers_question": true}',
            "repeat": True,
        },
        *react_turn("Q-UI-CHART-LIVE", code=CHART_CODE, answer="It drew the 2 regions."),
        *react_turn("Q-UI-CHART-PNG", code=CHART_CODE, answer="It drew the 2 regions."),
        *react_turn("Q-UI-CHART-TRACE", code=CHART_CODE, answer="It drew the 2 regions."),
        *react_turn("Q-UI-CHART-HEAT", code=HEATMAP_CODE, answer="It drew the heatmap."),
        {
            "when": ["[stage: review]", "Q-UI-CHART-"],
            "content": '{"answers_question": true}',
            "repeat": True,
        },
        *table_turn("Q-UI-TABLE"),  # issue 27: a 1,000,000-row table
        *variables_turn("Q-UI-TABLE-VARS"),
        *react_turn("Q-UI-RELOAD", code=REATTACH_CODE),
        *react_turn("Q-UI-LONG", code=LONG_OUTPUT_CODE, answer="It printed 45 lines."),
        *react_turn("Q-UI-DS-QUERY", code=DATA_SOURCE_CODE, answer="The customers are Ada and Bo."),
        *react_turn("Q-UI-DS-NONE", code="print('no query')\n", answer="It queried nothing."),
        *wide_turn(),
        *plan_turn(),
        *retried_turn(),
        {"when": "Q-UI-XSS", "content": XSS_MARKDOWN},
        {"when": "Q-UI-MATH", "content": MATH},
        {"when": "Q-UI-FENCE", "content": FENCE, "token_delay": 0.05},
        {"when": "Q-UI-RETRY", "error": "The upstream model timed out after 120 s."},
        {"when": "Q-UI-RETRY", "content": "Second time lucky."},
        {"when": "Q-UI-HELLO", "content": "Hello! Ask me about your data.", "repeat": True},
    ]
