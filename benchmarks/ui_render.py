"""How fast does the browser UI draw a long conversation and a long streamed answer?

A real server (scripted model) serves the UI to Debian's Chromium, driven by
Playwright. Two measurements, each against a baseline from the same run:

1. Open: a conversation of 200 stored messages (100 turns; 50 python code blocks
   of 15-30 lines, lists, bold, tables, inline code; in their steps, 10 tables of 500
   rows and 20 live charts, where backend.core.events has Table and Chart) is clicked
   in the sidebar. The time runs in the page (performance.now()) from the click event
   until the 100th `message-assistant` holds the last answer and the next frame has
   painted (a requestAnimationFrame callback, then a posted message). Split into the
   conversation fetch (resource timing), rendering, and the wait for that frame; also
   when its end (the last answer) was first painted, the longest gap between frames
   and the longest task meanwhile (goal: none of 50 ms or more). Then the newest
   charts are scrolled to and timed until drawn, each in its sandboxed frame (another
   process): the page's longest task and frame gap meanwhile, the libraries' longest
   task in the frames, and, from a Chromium trace, the wall and CPU time of each of the
   page's tasks of 50 ms or more (on a busy machine a task also waits for a core while
   the frames' process draws). A third conversation is opened between runs. Baseline:
   a 2-message one. Goal < 1 s.
2. Stream: a 2,000-word answer (markdown and two code fences, 5 ms a token) is
   streamed into a new chat. A PerformanceObserver counts 'longtask' entries
   (>= 50 ms) and Chromium's 'long-animation-frame' ones; a requestAnimationFrame
   loop finds the longest gap between frames, which also shows tasks under 50 ms.
   Baseline: the longest frame gap while the page idles for as long. Goal: no task
   of 50 ms or more. The server streams on the same machine, so a busy machine
   lengthens tasks too; compare runs on the same, quiet machine.

    .venv/bin/python -m benchmarks.ui_render [--runs 5] [--keep] [--trace PATH] [--smoke]

`--smoke`: one run, a conversation of 40 messages (2 tables, 4 charts) and a 200-word
stream without pauses, to check that it runs (`make test` does).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import pandas as pd
from playwright.sync_api import ConsoleMessage, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from backend.core import events
from backend.storage import open_store
from backend.storage.sessions import session_key
from backend.storage.workspaces import Workspaces
from benchmarks.coder_small_model import PASSWORD, benchmark_server, clean_up, default_trace
from tests.support.live_server import LiveServer
from tests.ui.browser import CHROMIUM, CHROMIUM_ARGS

STREAM_TAG, STREAM_WORDS, TOKEN_DELAY = "Q-BENCH-STREAM", 2000, 0.005
BIG_TURNS = 100  # of the long conversation
SMOKE = {"turns": 20, "words": 200, "sections": 1, "token_delay": 0.0}
OPEN_GOAL_MS, TASK_GOAL_MS = 1000.0, 50.0
ANSWER = '[data-testid="message-assistant"]'
META = {"agent_type": "chat", "route_reason": "benchmark", "finish_reason": "stop", "steps": []}
Seeded = tuple[str, str, int, str]  # conversation id, title, answers, the last answer's marker

# Installed before the UI's own scripts: long tasks, long animation frames and frame gaps
# (ui_render_probe.js says what each of its functions times).
INIT_JS = (Path(__file__).parent / "ui_render_probe.js").read_text()


def code_block(rng: random.Random, n: int, lines: int) -> str:
    body = ["import pandas as pd", f'df = pd.read_csv("sales_{n}.csv")', "", "def summarise(df):"]
    for k in range(lines - 6):
        column, how = rng.choice(["price", "units", "revenue"]), rng.choice(["sum", "mean"])
        body.append(f"    step_{k} = df['{column}'].{how}() * {k}  # step {k}")
    body += ["    return locals()", "print(summarise(df))"]
    return "```python\n" + "\n".join(body) + "\n```"


def answer_markdown(i: int, rng: random.Random, name: str) -> str:
    parts = [
        f"Here is **answer {i}**: the `revenue` column sums to {rng.randint(10, 99_999)}.",
        "- first, the **totals** per region\n- then the `mean` price\n- finally a check",
    ]
    if i % 2 == 0:  # 50 code blocks over the 100 answers
        parts.append(code_block(rng, i, 15 + (i * 7) % 16))
    if i % 10 == 0:
        rows = "\n".join(f"| r{k} | {rng.randint(1, 99)} | {rng.random():.3f} |" for k in range(4))
        parts.append(f"| region | units | share |\n|---|---:|---:|\n{rows}")
    parts.append(f"1. One\n2. Two with *emphasis*\n\nEND-{name}-{i}")
    return "\n\n".join(parts)


def png(width: int, height: int) -> bytes:
    """A plain grey PNG, as big on screen as a chart's."""
    row = b"\x00" + b"\xd0" * (3 * width)
    body = zlib.compress(row * height, 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _made(event: Any, **fields: Any) -> Any:
    """`event(**fields)`, less the URL fields of a tree whose events leave them to the API."""
    return event(**{k: v for k, v in fields.items() if k in event.model_fields})


def table_and_chart_steps(i: int, workspace: Path, folder: str) -> list[dict[str, Any]]:
    """The stored steps of answer `i` of the long conversation: every tenth (from the
    fourth) ran code that showed a table (500 rows), every tenth (from the eighth) code
    that drew a Plotly and a Vega-Lite chart; their files are written to `workspace`,
    served under `folder`. Each kind is added only where backend.core.events defines
    its event (Table, Chart), so the benchmark runs on a tree without either."""
    table_event, chart_event = getattr(events, "Table", None), getattr(events, "Chart", None)
    run_id = f"{i:012x}"
    steps: list[Any] = []
    if i % 10 == 3 and table_event is not None:
        table_id, n = f"{run_id}_1", 500
        frame = pd.DataFrame({
            "region": [f"region {k % 7}" for k in range(n)], "units": range(n),
            "price": [round(1.5 * k % 97, 2) for k in range(n)],
            "day": pd.date_range("2024-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
        })  # fmt: skip
        path = workspace / "outputs" / ".tables" / f"{table_id}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path)
        types = {"region": "string", "units": "int64", "price": "double", "day": "string"}
        steps.append(_made(
            table_event, tool="python_coder", run_id=run_id, table_id=table_id, name="sales",
            source="expression", rows=n, url=folder.replace("/files/", "/tables/") + table_id,
            columns=[{"name": c, "type": t} for c, t in types.items()],
            preview=frame.head(20).values.tolist(),
        ))  # fmt: skip
    if i % 10 == 7 and chart_event is not None:
        values = [{"region": f"region {k}", "price": 10 + 3 * k + i % 5} for k in range(6)]
        specs = {
            "plotly": ("plotly.json", {
                "data": [{"type": "bar", "x": [v["region"] for v in values],
                          "y": [v["price"] for v in values]}],
                "layout": {"title": {"text": f"Prices {i}"}, "height": 360},
            }),
            "vega-lite": ("vl.json", {
                "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
                "data": {"values": values}, "mark": "bar", "height": 300,
                "encoding": {"x": {"field": "region", "type": "nominal"},
                             "y": {"field": "price", "type": "quantitative"}},
            }),
        }  # fmt: skip
        for n, (library, (suffix, spec)) in enumerate(specs.items(), start=1):
            stem = f"outputs/chart_{run_id}_{n}"
            spec_path, png_path = f"{stem}.{suffix}", f"{stem}.png"
            (workspace / "outputs").mkdir(parents=True, exist_ok=True)
            (workspace / spec_path).write_text(json.dumps(spec))
            (workspace / png_path).write_bytes(png(640, 400))
            steps.append(_made(
                chart_event, tool="python_coder", run_id=run_id, library=library,
                spec_path=spec_path, spec_url=folder + spec_path, png_path=png_path,
                png_url=folder + png_path,
            ))  # fmt: skip
    if not steps:
        return []
    code = "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf\n"
    files = [path for s in steps if s.type == "chart" for path in (s.spec_path, s.png_path)]
    ran: list[Any] = [
        events.ToolCall(tool="python_coder", input=f"question {i}", thought=""),
        events.Code(tool="python_coder", attempt=1, code=code),
        events.Execution(
            tool="python_coder",
            attempt=1,
            run_id=run_id,
            ok=True,
            stdout="shown",
            error=None,
            files=files,
        ),
    ]
    return [step.payload() for step in ran + steps]


def stream_reply(length: int = STREAM_WORDS, sections: int = 12) -> str:
    """Exactly `length` words (= scripted tokens), ending with END-OF-STREAM."""
    rng = random.Random(2)
    parts: list[str] = []
    for section in range(sections):
        parts.append(f"## Section {section}\n\nSome **bold** text and `inline code` here.")
        parts.append("- an item with *emphasis*\n- another item\n- a [link](https://example.org)")
        if section in (3, 8):
            parts.append(code_block(rng, section, 24))
        if section == 5:
            parts.append("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |")
        words = " ".join(rng.choice(["data", "mean", "value", "column", "rows"]) for _ in range(90))
        parts.append(words.capitalize() + ".")
    text = "\n\n".join(parts)
    missing = length - len(text.split()) - 1
    assert missing >= 0, f"the stream reply is longer than {length} words"
    return text + " filler" * missing + " END-OF-STREAM"


def setup(
    root: Path,
    turns: int = BIG_TURNS,
    words: int = STREAM_WORDS,
    sections: int = 12,
    token_delay: float = TOKEN_DELAY,
) -> tuple[LiveServer, dict[str, Seeded]]:
    """Start the server and store the conversations: name -> (id, title, answers, marker);
    the long one has `turns` turns, the streamed answer `words` words."""
    streamed = stream_reply(words, sections)
    replies = [
        {"when": STREAM_TAG, "content": streamed, "token_delay": token_delay, "repeat": True},
        {"content": "OK.", "repeat": True},
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "replies.json").write_text(json.dumps(replies))
    server = benchmark_server(root, "scripted", 1)
    server.env["SCRIPTED_REPLIES"] = str(root / "replies.json")
    server.start()
    store = open_store(os.environ.get("DATABASE_URL", ""), server.data_dir)  # WAL: safe live
    user = store.get_user("admin")
    if user is None:
        raise RuntimeError("the server did not create the admin user")
    rng, seeded = random.Random(1), {}
    for name, count in (("big", turns), ("small", 1), ("spacer", 1)):
        title = f"Benchmark {name} conversation ({2 * count} messages)"
        session_id = os.urandom(16).hex()
        key = session_key(user.id, session_id)  # the store keeps sessions by key
        conversation = store.conversation_for_session(user.id, key, title)
        workspace = Workspaces(server.data_dir).path(key)
        folder = f"/api/sessions/{session_id}/files/"
        for i in range(count):
            steps = table_and_chart_steps(i, workspace, folder) if name == "big" else []
            store.add_message(conversation.id, "user", f"Question {i}: what about `col_{i}`?")
            answer = answer_markdown(i, rng, name)
            store.add_message(conversation.id, "assistant", answer, {**META, "steps": steps})
        seeded[name] = (conversation.id, title, count, f"END-{name}-{count - 1}")
    store.close()
    return server, seeded


def open_once(page: Page, conversation: Seeded) -> dict[str, float]:
    conversation_id, title, answers, marker = conversation
    page.evaluate("(a) => window.__armOpen(...a)", [answers, marker, conversation_id, ANSWER])
    item = page.get_by_test_id("conversation-item").filter(has_text=title)
    item.get_by_role("button", name=title, exact=True).click()
    return dict(page.evaluate("window.__open"))


def measure_open(page: Page, seeded: dict[str, Seeded], runs: int) -> Any:
    """Open each conversation `runs` times; after the big one, scroll to its newest charts."""
    samples: dict[str, list[Any]] = {"big": [], "small": [], "charts": []}
    for _ in range(runs):
        for name in ("big", "small"):
            open_once(page, seeded["spacer"])
            samples[name].append(open_once(page, seeded[name]))
            if name == "big":
                samples["charts"].append(draw_charts(page))
    return samples


# The longest task a chart frame ran (INIT_JS is installed in every frame, this one too).
FRAME_TASK_JS = "Math.max(0, ...window.__perf.longtask.map((e) => e.duration))"
TRACE_CATEGORIES = ["toplevel", "disabled-by-default-devtools.timeline"]


def draw_charts(page: Page) -> dict[str, Any] | None:
    """Scroll to the newest charts and time them until drawn, under a Chromium trace that
    gives each of the page's main-thread tasks its CPU time next to its wall time: on a
    busy machine a task also waits for a core, which its wall time counts."""
    browser = page.context.browser
    assert browser is not None
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    drawn: dict[str, Any] | None = page.evaluate("window.__drawCharts()")
    trace = json.loads(browser.stop_tracing())
    if drawn:
        frames = [frame for frame in page.frames if frame.url.endswith("/chart-frame")]
        # The libraries' own tasks, in the charts' sandboxed frames (out of the page's).
        drawn["frame_task"] = max([0.0] + [frame.evaluate(FRAME_TASK_JS) for frame in frames])
        drawn["page_tasks"] = page_tasks(trace)
    return drawn


def page_tasks(trace: Any) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) of each task of 50 ms or more on the page's renderer main thread."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    started = next(e for e in events if e.get("name") == "TracingStartedInBrowser")
    frames = started["args"]["data"]["frames"]
    pid = next(f["processId"] for f in frames if f.get("isOutermostMainFrame"))
    main = {e["tid"] for e in events if e.get("pid") == pid and e.get("name") == "thread_name"
            and e["args"].get("name") == "CrRendererMain"}  # fmt: skip
    return [
        (e["dur"] / 1000, e.get("tdur", 0) / 1000)
        for e in events
        if e.get("pid") == pid and e.get("tid") in main and e.get("ph") == "X"
        and e.get("name") == "ThreadControllerImpl::RunTask" and e.get("dur", 0) >= 50_000
    ]  # fmt: skip


def measure_stream(page: Page) -> dict[str, Any]:
    page.get_by_test_id("new-chat").click()
    page.wait_for_function(f"() => !document.querySelector('{ANSWER}')")
    if page.get_by_test_id("agent-select").count():
        page.get_by_test_id("agent-select").select_option("chat")
    page.evaluate("window.__rafStart()")
    started = time.perf_counter()
    composer = page.get_by_test_id("composer")
    composer.fill(f"{STREAM_TAG} please tell me a long story")
    composer.press("Enter")
    ended = f"""() => {{ const all = document.querySelectorAll('{ANSWER}');
        const last = all[all.length - 1];
        return last && (['stopped', 'error'].includes(last.dataset.runState) ||
          (last.dataset.runState === 'done' && last.textContent.includes('END-OF-STREAM'))); }}"""
    page.wait_for_function(ended, polling=100, timeout=180_000)
    result: dict[str, Any] = page.evaluate("window.__rafStop()")
    result["wall_s"] = time.perf_counter() - started
    ended_as = page.get_by_test_id("message-assistant").last.get_attribute("data-run-state")
    if ended_as != "done":
        raise RuntimeError(f"the streamed answer ended {ended_as}")
    return result


def report(results: dict[str, Any]) -> None:
    opened, stream, idle = results["open"], results["stream"], results["idle"]
    big, small = ([s["total"] for s in opened[name]] for name in ("big", "small"))
    median = statistics.median

    def goal(value: float, limit: float) -> str:
        return f"< {limit:.0f} ms: {'yes' if value < limit else 'NO'}"

    def phase(key: str, how: Any = median) -> tuple[float, float]:
        return how(s[key] for s in opened["big"]), how(s[key] for s in opened["small"])

    messages = results["messages"]

    rows: list[tuple[str, float, float, str]] = [
        (f"open {messages} messages, median", median(big), median(small),
         goal(median(big), OPEN_GOAL_MS)),
        (f"open {messages} messages, max", max(big), max(small), goal(max(big), OPEN_GOAL_MS)),
        ("  its end painted (median)", *phase("first"), ""),
        ("  fetch (median)", *phase("fetch"), ""),
        ("  render (median)", *phase("render"), ""),
        ("  paint (median)", *phase("paint"), ""),
        ("  longest frame gap (median)", *phase("max_gap"), ""),
        ("open: longest task, median", *phase("longest_task"),
         goal(phase("longest_task")[0], TASK_GOAL_MS)),
        ("open: longest task, max", *phase("longest_task", max),
         goal(phase("longest_task", max)[0], TASK_GOAL_MS)),
    ]  # fmt: skip
    rows += [
        (f"stream {results['words']} tokens: longest task", stream["longest_task"],
         idle["longest_task"], goal(stream["longest_task"], TASK_GOAL_MS)),
        ("  longest gap between frames", stream["max_gap"], idle["max_gap"], ""),
    ]  # fmt: skip
    print(f"\nChromium {results['chromium']}; {len(big)} runs; times from performance.now()")
    print(f"{'figure':<36} {'value':>9} {'baseline':>9} {'ratio':>7}  goal")
    print("-" * 80)
    for label, value, base, met in rows:
        ratio = f"{value / base:.1f}x" if base else "-"
        value_ms, base_ms = (f"{v:.0f} ms" if v else "none" for v in (value, base))
        print(f"{label:<36} {value_ms:>9} {base_ms:>9} {ratio:>7}  {met}")
    counts = [("long tasks >= 50 ms", "longtasks"), ("frame gaps >= 50 ms", "gaps_over_50"),
              ("frames", "frames"), ("long animation frames", "loafs")]  # fmt: skip
    for label, key in counts if stream["loaf_supported"] else counts[:-1]:
        print(f"  {label:<34} {stream[key]:>9} {idle[key]:>9}")
    loaf = stream["longest_loaf"]
    if not stream["loaf_supported"]:
        print("  (this Chromium reports no long-animation-frame entries)")
    elif loaf:
        print(
            f"  longest animation frame {loaf['duration']:.0f} ms: blocking {loaf['blocking']:.0f}"
            f" ms, scripts {loaf['scripts']:.0f} ms, style+layout {loaf['layout']:.0f} ms;"
            f" longest script {loaf['script'] or '-'}"
        )
    at = ", ".join(f"{start / 1000:.1f} s ({ms:.0f} ms)" for start, ms in stream["at"])
    print(f"  the stream took {stream['seconds']:.1f} s; long tasks began at {at or '-'}")
    scripts = [s["longest_script"] for s in opened["big"] if s["longest_script"]]
    if scripts:
        print(f"opening {messages} messages, each run's longest script in a long animation frame:")
        print("".join(f"  {script}\n" for script in scripts), end="")
    charts = [c for c in opened["charts"] if c]
    if charts:  # the first time loads the libraries; later ones only draw
        states = sorted({state for c in charts for state in c["states"]})
        rest = charts[1:] or charts
        worst = max(c["longest_task"] for c in charts)
        print(
            f"newest charts scrolled to after an open: drawn in {charts[0]['time']:.0f} ms the"
            f" first time (longest task {charts[0]['longest_task']:.0f} ms), then"
            f" {median(c['time'] for c in rest):.0f} ms (longest task, median"
            f" {median(c['longest_task'] for c in rest):.0f} ms); ended {', '.join(states)}"
        )
        cpu = max([0.0] + [task[1] for c in charts for task in c["page_tasks"]])
        long = ", ".join(f"{w:.0f}/{c:.0f}" for chart in charts for w, c in chart["page_tasks"])
        print(
            f"  while charts drew, in the page: longest task {worst:.0f} ms"
            f" ({goal(worst, TASK_GOAL_MS)}), longest frame gap"
            f" {max(c['max_gap'] for c in charts):.0f} ms; the libraries' longest task in their"
            f" sandboxed frames (another process): {max(c['frame_task'] for c in charts):.0f} ms"
        )
        print(
            f"  the page's tasks >= 50 ms, wall/CPU ms (Chromium trace): {long or 'none'};"
            f" the most CPU one took {cpu:.0f} ms ({goal(cpu, TASK_GOAL_MS)})"
        )
        scripts = [c["longest_script"] for c in charts if c["longest_script"]]
        if scripts:
            print("  each run's longest script in a long animation frame while charts drew:")
            print("".join(f"    {script}\n" for script in scripts), end="")


def drive(server: LiveServer, seeded: dict[str, Seeded], runs: int, errors: list[str]) -> Any:
    """Sign in, then measure; what the page logged as an error goes to `errors`."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})

        def console(message: ConsoleMessage) -> None:
            if message.type == "error":  # a failed request names its URL in `location`
                errors.append(f"{message.text} ({message.location['url']})")

        page.on("console", console)
        page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
        page.add_init_script(INIT_JS)
        page.goto(server.url + "/")
        page.get_by_test_id("login-username").fill("admin")
        page.get_by_test_id("login-password").fill(PASSWORD)
        page.get_by_test_id("login-submit").click()
        page.get_by_test_id("conversation-item").first.wait_for(timeout=30_000)
        opened = measure_open(page, seeded, runs)
        stream = measure_stream(page)
        page.evaluate("window.__rafStart()")  # the baseline: the page idles as long
        time.sleep(stream["seconds"])
        idle = page.evaluate("window.__rafStop()")
        return {"chromium": browser.version, "open": opened, "stream": stream, "idle": idle}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="times each conversation is opened")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument("--trace", type=Path, default=default_trace("ui-render"))
    parser.add_argument("--smoke", action="store_true", help="one short run, to check it runs")
    args = parser.parse_args()
    sizes: dict[str, Any] = SMOKE if args.smoke else {}
    if args.smoke:
        args.runs = 1
    root = Path(tempfile.mkdtemp(prefix="ui-render-"))
    errors: list[str] = []
    server, seeded = setup(root, **sizes)
    try:
        results = drive(server, seeded, args.runs, errors)
        results.update(messages=2 * seeded["big"][2], words=sizes.get("words", STREAM_WORDS))
    except (PlaywrightError, RuntimeError) as exc:
        print(f"could not drive the UI: {exc}")
        results = None
    finally:
        server.stop()
    if results:
        report(results)
        args.trace.write_text(json.dumps({**results, "errors": errors}, indent=1))
        print(f"trace: {args.trace}")
    if errors:
        print("errors in the page:", *errors, sep="\n  ")
    clean_up(root, server, args.keep)
    return 0 if results and not (args.smoke and errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
