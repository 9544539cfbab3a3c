"""Take docs/ui.png, the README's screenshot: a real session in the real UI.

`.venv/bin/python -m scripts.screenshot` starts the server on 127.0.0.1 with the scripted
model (the offline embedded model cannot write this code), signs in through the page in
Debian's Chromium, drops `monthly_sales_2023_2024.csv` (see `scripts/sales_data.py`) on
it and asks a question. Only the model's replies are scripted: the code really runs in
the session's sandbox on that file, and its output, plot and the answer's citations are
the server's. The script stops with an error if the page shows anything else, logs a
console error, or replaces the answer because its numbers are not the ones the code printed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect, sync_playwright

from scripts.sales_data import FILE_NAME, sales_csv
from tests.support.live_server import ROOT, LiveServer
from tests.ui.browser import CHROMIUM, CHROMIUM_ARGS, ConsoleWatch, drop_file, send

QUESTION = (
    "Which region grew its total revenue fastest from 2023 to 2024? "
    "Plot the monthly revenue of each region."
)
ASKED = "grew its total revenue"  # what the scripted replies recognise the question by
THOUGHT = (
    "Thought: The sales file has monthly revenue per region and product. I will sum it "
    "per region and year, compare the two years and chart the months.\n"
    "Action: python_coder\n"
    "Action Input: Revenue growth per region, 2023 to 2024, and a monthly chart"
)
CODE = """\
import pandas as pd
import matplotlib.pyplot as plt

sales = df1.assign(month=pd.to_datetime(df1["month"]))
monthly = sales.pivot_table(
    index="month", columns="region", values="revenue", aggfunc="sum"
)
yearly = monthly.groupby(monthly.index.year).sum()

summary = yearly.T.round(0).astype(int)
growth = (summary[2024] / summary[2023] - 1) * 100
summary["growth_%"] = growth.round(1)
summary = summary.sort_values("growth_%", ascending=False)
print(summary.rename_axis(index=None, columns=None).to_string())

ax = (monthly / 1000).plot(figsize=(9, 4), marker="o")
ax.set(title="Monthly revenue by region", xlabel="",
       ylabel="revenue (thousand $)")
ax.grid(alpha=0.3)
plt.tight_layout()
"""
# What the code prints for the generated file; the answer states these numbers.
PRINTED = ("South", "19.1", "13.7", "4.4", "-2.4")
ANSWER = (
    "**South** grew fastest: its revenue rose **19.1%**, from $1.47 million in 2023 to "
    "$1.76 million in 2024.\n\n"
    "| Region | Growth |\n|---|---|\n| South | 19.1% |\n| East | 13.7% |\n"
    "| North | 4.4% |\n| West | -2.4% |\n\n"
    "North still sells the most ($1.96 million in 2024), but West is the only region "
    "that shrank. Every region peaks in December."
)
WIDTH, HEIGHT = 1440, 1700


def replies() -> list[dict[str, Any]]:
    """The model's side of the turn, stage by stage (see backend/llm/scripted.py)."""
    return [
        {"when": ["[stage: react]", ASKED], "content": THOUGHT},
        {"when": ["[stage: generate]", "monthly chart"], "content": f"```python\n{CODE}```"},
        {"when": ["[stage: review]", "monthly chart"], "content": '{"answers_question": true}'},
        {"when": ["[stage: answer]", "monthly chart"], "content": ANSWER},
        {"when": ["[stage: react]", ASKED], "content": f"Final Answer: {ANSWER}"},
    ]


def take(page: Page, server: LiveServer, password: str, out: Path) -> None:
    page.goto(server.url + "/")
    page.get_by_test_id("login-username").fill("admin")
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("composer")).to_be_visible()

    drop_file(page, FILE_NAME, sales_csv())
    expect(page.get_by_test_id("file-card")).to_contain_text("region", timeout=30_000)
    send(page, QUESTION)

    answer = page.get_by_test_id("message-assistant").last
    expect(answer).to_have_attribute("data-run-state", "done", timeout=120_000)
    expect(answer.get_by_test_id("step-router")).to_contain_text("ReAct")
    output = answer.get_by_test_id("step-output")
    for number in PRINTED:
        expect(output).to_contain_text(number)
    # The scripted answer survived the server's grounding check (else it shows the output).
    expect(answer).to_contain_text("South grew fastest")
    expect(answer.get_by_test_id("cite").first).to_be_visible()
    plot = answer.get_by_test_id("plot")
    expect(plot).to_be_visible()
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=plot.element_handle()
    )
    page.locator("#files-toggle").click()  # the turn gets the width
    expect(page.get_by_test_id("files-panel")).to_be_hidden()
    page.mouse.move(0, 0)  # no hover state in the picture
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui.png")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="screenshot-"))
    script = root / "replies.json"
    script.write_text(json.dumps(replies()))
    password = secrets.token_urlsafe(16)
    server = LiveServer(
        root / "data", LLM_BACKEND="scripted", SCRIPTED_REPLIES=str(script), ADMIN_PASSWORD=password
    )
    server.start()
    watch = ConsoleWatch()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.on("console", watch.on_console)
            page.on("pageerror", watch.on_page_error)
            take(page, server, password, args.out)
            browser.close()
    finally:
        server.stop()
    if watch.unexpected():
        raise SystemExit(f"the page logged errors: {watch.unexpected()}")
    print(f"wrote {args.out} ({WIDTH}x{HEIGHT}); server log: {server.log_path}")


if __name__ == "__main__":
    main()
