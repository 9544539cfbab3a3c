"""The product at the door: started the way `make run` starts it, used the way README.md says.

One server for the module, started from a copy of the checkout (the files a clone of it
holds, plus the build outputs `make run` makes: the venv and the UI's vendored libraries) as
its working directory, with no test settings at all: no `DATA_DIR`, no `ADMIN_PASSWORD`, no model
settings, only PATH, HOME, LANG and the `PORT` a user who is not root sets. Nothing answers
on Ollama's default address, so `LLM_BACKEND=auto` picks the embedded model (SmolLM2-135M,
real and offline). The admin's password is read where the README says, the README's journey
is driven in Chromium, and the README's OpenAI SDK snippet is run as it is printed there.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.support.live_server import ROOT, free_port
from tests.support.processes import stop_group
from tests.ui.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    CSP_WATCH,
    ConsoleWatch,
    Person,
    last_answer,
    login,
    send,
)

READY = re.compile(r"Open (http://\S+) in your browser\.")
START_TIMEOUT = 120  # the first start loads llama.cpp and the embedded model
TURN_TIMEOUT_MS = 90_000

# Totals: North 3600, South 4550, East 2970, West 3150: South. Wrong sums name the others:
# the largest single row is West's, the most units East's, the first row and the first
# region alphabetically are North's and East's.
SALES_CSV = b"""region,units,revenue
North,10,1200
East,8,950
South,12,1400
West,5,2600
North,11,1300
East,9,1000
South,14,1650
West,4,300
North,9,1100
East,25,1020
South,13,1500
West,3,250
"""
QUESTION = "Which region had the highest total revenue?"
ANSWER = "South"


@dataclass
class Door:
    checkout: Path
    url: str  # as printed: "Open <url> in your browser."
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def python(self) -> Path:
        return self.checkout / ".venv" / "bin" / "python"

    def printed(self) -> str:
        return self.stdout.read_text(errors="replace")

    def log(self) -> str:
        return (
            f"--- stdout (first 4000 chars) ---\n{self.printed()[:4000]}\n"
            f"--- stderr (last 6000 chars) ---\n{self.stderr.read_text(errors='replace')[-6000:]}"
        )


def user_environment(home: Path) -> dict[str, str]:
    """What a person's shell passes on: no setting of ours."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }


def copy_checkout(target: Path) -> None:
    """The checkout's files as a clone of them would hold them (tracked ones, and new ones
    git does not ignore: never `data/` or `.env`), and the build outputs `make run` makes."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        source = ROOT / name
        if not source.is_file():  # deleted in the working tree, or a submodule
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name)
    # `make run`'s install target: the venv this suite runs in, hard-linked (a second or two),
    # so that the copy's `.venv` is a directory of its own, as `make run` makes it.
    subprocess.run(
        ["cp", "-a", "--link", str(Path(sys.prefix).resolve()), str(target / ".venv")], check=True
    )
    # `make run`'s frontend target: the UI's pinned libraries, copied where the app serves them.
    vendor = ROOT / "frontend" / "assets" / "vendor"
    assert (vendor / ".installed").exists(), "the UI's libraries are missing: run `make frontend`"
    subprocess.run(
        ["cp", "-a", "--link", str(vendor.resolve()), str(target / vendor.relative_to(ROOT))],
        check=True,
    )
    assert not (target / ".env").exists()  # .env is ignored: nothing may set a test setting


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    root = tmp_path_factory.mktemp("door")
    checkout = root / "python-data-agent"
    copy_checkout(checkout)
    home = root / "home"
    home.mkdir()
    stdout, stderr = root / "stdout.log", root / "stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:  # the child keeps its own copies
        process = subprocess.Popen(
            [".venv/bin/python", "run_backend.py"],  # the `run` target's command
            cwd=checkout,
            env={**user_environment(home), "PORT": str(free_port())},  # as README says
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its sandboxes too are stopped with it
        )
    started = Door(checkout, "", process, stdout, stderr)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while (ready := READY.search(started.printed())) is None:
            assert process.poll() is None, (
                f"the server exited ({process.returncode}):\n{started.log()}"
            )
            assert time.monotonic() < deadline, f"no URL in {START_TIMEOUT} s:\n{started.log()}"
            time.sleep(0.1)
        started.url = ready.group(1)
        yield started
    finally:
        stop_group(process, timeout=15)


def readme_password_file() -> str:
    """Where README.md says the generated password can be read again, from the checkout."""
    readme = (ROOT / "README.md").read_text()
    named = re.findall(r"(?<![\w/])[\w.-][\w./-]*initial_admin_password", readme)
    assert named, "README.md does not say where the generated admin password is kept"
    return str(named[0])


def admin_password(door: Door) -> str:
    """Read the way the README says, from the file the start-up banner names."""
    password_file = door.checkout / readme_password_file()
    assert password_file.is_file(), f"no {password_file}:\n{door.log()}"
    mode = stat.S_IMODE(password_file.stat().st_mode)
    assert mode == 0o600, f"{password_file} has mode {mode:o}: others may read it"
    named = [
        (door.checkout / match.lstrip("'\"`(")).resolve()
        for match in re.findall(r"\S*initial_admin_password", door.printed())
    ]
    assert password_file.resolve() in named, (
        f"the banner does not name {password_file}:\n{door.log()}"
    )
    password = password_file.read_text().strip()
    assert password
    return password


def names_the_right_region(output: str) -> bool:
    """The output names South; if it names other regions too, it is a table of the totals."""
    regions = {"North", "South", "East", "West"}
    named = {region for region in regions if re.search(rf"\b{region}\b", output)}
    return ANSWER in named and (named == {ANSWER} or re.search(r"\b4,?550\b", output) is not None)


@contextlib.contextmanager
def server_log_on_failure(door: Door) -> Iterator[None]:
    try:
        yield
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{door.log()}") from None


def test_signed_in_with_a_csv_auto_runs_code_and_its_output_answers(door: Door) -> None:
    password = admin_password(door)
    watch = ConsoleWatch()
    with sync_playwright() as playwright, server_log_on_failure(door):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.add_init_script(CSP_WATCH)
            page = context.new_page()
            page.on("console", watch.on_console)
            page.on("pageerror", watch.on_page_error)
            page.goto(door.url)
            login(page, Person("admin", password))

            with page.expect_file_chooser() as chooser:
                page.get_by_role("button", name="Upload files").click()  # the paperclip
            chooser.value.set_files(
                files=[{"name": "sales.csv", "mimeType": "text/csv", "buffer": SALES_CSV}]
            )
            expect(page.get_by_test_id("file-card")).to_contain_text("12 rows")

            expect(page.get_by_test_id("agent-select")).to_have_value("auto")  # left on Auto
            send(page, QUESTION)
            answer = last_answer(page)
            expect(answer.get_by_test_id("step-code").first).to_be_visible(timeout=TURN_TIMEOUT_MS)
            ran = answer.locator("[data-testid=step-output]:not(.is-error)")
            expect(ran.filter(has_text=ANSWER).first).to_be_visible(timeout=TURN_TIMEOUT_MS)
            expect(page.get_by_test_id("send")).to_be_visible(timeout=TURN_TIMEOUT_MS)  # done
            outputs = ran.all_inner_texts()
            assert any(names_the_right_region(output) for output in outputs), outputs
            violations = page.evaluate("window.__csp")
            context.close()
        finally:
            browser.close()
    assert not violations, f"CSP violations: {violations}"
    assert not watch.unexpected(), f"console errors: {watch.unexpected()}"


def readme_sdk_snippet() -> str:
    """The python block of README.md's "Use it from the OpenAI SDK" section, as printed."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use it from the OpenAI SDK", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "README.md's OpenAI SDK section should hold one python block"
    return str(blocks[0])


def test_the_readmes_openai_sdk_snippet_streams_an_answer(door: Door, tmp_path: Path) -> None:
    snippet, base = readme_sdk_snippet(), door.url.rstrip("/")
    snippet, bases = re.subn(r'BASE = "http://127\.0\.0\.1:\d+"', f'BASE = "{base}"', snippet)
    assert bases == 1 and "YOUR_PASSWORD" in snippet, snippet
    script = tmp_path / "snippet.py"
    script.write_text(snippet.replace("YOUR_PASSWORD", admin_password(door)))
    home = tmp_path / "home"
    home.mkdir()
    ran = subprocess.run(
        [str(door.python()), str(script)],
        cwd=tmp_path,
        env=user_environment(home),
        capture_output=True,
        text=True,
        timeout=180,  # the embedded model's answer, streamed on a CPU
    )
    assert ran.returncode == 0, f"{ran.stderr}\n{door.log()}"
    assert ran.stdout.strip(), "the snippet printed no streamed text"
