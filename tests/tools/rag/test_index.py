"""Indexing uploads per user and BM25 search over them."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import pytest

from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.storage.workspaces import UnsafePath, Workspaces
from backend.tools.rag import DocumentNotFound, RagIndex, Section, UnsupportedDocument
from tests.files.helpers import zip_bomb_bytes
from tests.tools.rag.conftest import Upload
from tests.tools.rag.samples import docx_bytes, filler, pdf_bytes

SESSION = "u1-session-a"
T = TypeVar("T")


async def test_every_document_type_is_found_with_source_and_page(
    index: RagIndex, upload: Upload, tmp_path: Path
) -> None:
    upload(SESSION, "notes.txt", filler("llamas", 3) + " The llama herd grazes on the hill.")
    upload(SESSION, "guide.md", "# Setup\n\nInstall the turbine before lunch.\n")
    upload(SESSION, "page.html", "<h1>Menu</h1><p>Our pancakes &amp; syrup.</p><script>x</script>")
    upload(SESSION, "report.pdf", pdf_bytes(tmp_path, ["Intro about nothing", "Glacier melt rose"]))
    upload(SESSION, "memo.docx", docx_bytes([("heading", "Budget"), ("body", "Buy telescopes.")]))
    upload(SESSION, "table.csv", "a,b\n1,2\n")  # not a document: not indexed

    outcomes = await index.index_session(1, SESSION)
    assert {(o.source, o.status) for o in outcomes} == {
        ("uploads/notes.txt", "indexed"),
        ("uploads/guide.md", "indexed"),
        ("uploads/page.html", "indexed"),
        ("uploads/report.pdf", "indexed"),
        ("uploads/memo.docx", "indexed"),
    }
    found = {
        query: [(p.source, p.page, p.section) for p in await index.search(1, query)]
        for query in ("llama herd", "turbine", "pancakes syrup", "glacier melt", "telescopes")
    }
    assert found == {
        "llama herd": [("uploads/notes.txt", None, None)],
        "turbine": [("uploads/guide.md", None, "Setup")],
        "pancakes syrup": [("uploads/page.html", None, "Menu")],
        "glacier melt": [("uploads/report.pdf", 2, None)],
        "telescopes": [("uploads/memo.docx", None, "Budget")],
    }
    assert await index.search(1, "steal") == []  # html scripts are not text
    db = tmp_path / "rag" / "user_1.sqlite3"
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_bm25_ranks_passages_matching_more_terms_higher(
    index: RagIndex, upload: Upload
) -> None:
    upload(SESSION, "one.txt", "Solar output was measured on the roof.")
    upload(SESSION, "three.txt", "Solar panel efficiency was measured on the roof.")
    upload(SESSION, "two.txt", "Solar panel output was measured on the roof.")
    upload(SESSION, "none.txt", "Wind output was measured on the roof.")
    await index.index_session(1, SESSION)
    passages = await index.search(1, "solar panel efficiency")
    assert [p.source for p in passages] == [
        "uploads/three.txt",
        "uploads/two.txt",
        "uploads/one.txt",
    ]
    assert passages[0].score > passages[1].score > passages[2].score
    assert [p.source for p in await index.search(1, "solar panel efficiency", k=1)] == [
        "uploads/three.txt"
    ]


async def test_one_users_search_never_returns_another_users_passages(
    index: RagIndex, upload: Upload, tmp_path: Path
) -> None:
    upload("u1-s-1", "secret.txt", "The launch code is pineapple.")
    upload("u2-s-2", "public.txt", "The cafeteria serves pineapple on Fridays.")
    await index.index_session(1, "u1-s-1")
    await index.index_session(2, "u2-s-2")
    assert [p.source for p in await index.search(1, "pineapple")] == ["uploads/secret.txt"]
    assert [p.source for p in await index.search(2, "pineapple")] == ["uploads/public.txt"]
    assert await index.search(2, "launch code") == []
    assert await index.search(3, "pineapple") == []  # no index at all
    assert sorted(path.name for path in (tmp_path / "rag").glob("*.sqlite3")) == [
        "user_1.sqlite3",
        "user_2.sqlite3",
    ]
    with pytest.raises(ValueError, match="user id"):
        await index.search(-1, "pineapple")


async def test_search_can_be_limited_to_one_session(index: RagIndex, upload: Upload) -> None:
    upload("u1-s-1", "a.txt", "Quarterly kiwi harvest.")
    upload("u1-s-2", "b.txt", "Annual kiwi harvest.")
    await index.index_session(1, "u1-s-1")
    await index.index_session(1, "u1-s-2")
    assert len(await index.search(1, "kiwi")) == 2
    assert [p.session_id for p in await index.search(1, "kiwi", session_id="u1-s-2")] == ["u1-s-2"]
    await index.forget_session(1, "u1-s-2")
    assert [p.session_id for p in await index.search(1, "kiwi")] == ["u1-s-1"]


async def test_reindexing_is_a_no_op_unless_the_file_changed(
    index: RagIndex, upload: Upload
) -> None:
    upload(SESSION, "log.txt", filler("walruses", 60))
    first = await index.index_file(1, SESSION, "log.txt")
    assert first.status == "indexed" and first.chunks > 1
    ids = [p.id for p in await index.search(1, "walruses", k=20)]

    again = await index.index_file(1, SESSION, "uploads/log.txt")
    assert (again.status, again.chunks) == ("unchanged", 0)
    assert [p.id for p in await index.search(1, "walruses", k=20)] == ids

    upload(SESSION, "log.txt", "Now only about penguins.")
    changed = await index.index_file(1, SESSION, "log.txt")
    assert (changed.status, changed.chunks) == ("indexed", 1)
    assert await index.search(1, "walruses") == []
    assert [p.text for p in await index.search(1, "penguins", k=20)] == ["Now only about penguins."]


async def test_deleted_uploads_are_forgotten(index: RagIndex, upload: Upload) -> None:
    path = upload(SESSION, "gone.md", "Temporary zeppelin notes.")
    await index.index_session(1, SESSION)
    path.unlink()
    outcomes = await index.index_session(1, SESSION)
    assert [(o.source, o.status) for o in outcomes] == [("uploads/gone.md", "removed")]
    assert await index.search(1, "zeppelin") == []


async def test_links_and_odd_names_are_refused(
    index: RagIndex, upload: Upload, workspaces: Workspaces, tmp_path: Path
) -> None:
    secret = tmp_path / "server-secret.txt"
    secret.write_text("The admin password is swordfish.")
    upload(SESSION, "real.txt", "Nothing secret.")
    (workspaces.path(SESSION) / "uploads" / "planted.txt").symlink_to(secret)
    await index.index_session(1, SESSION)
    assert await index.search(1, "swordfish password") == []
    with pytest.raises(DocumentNotFound):
        await index.index_file(1, SESSION, "planted.txt")
    with pytest.raises(DocumentNotFound):
        await index.index_file(1, SESSION, "missing.txt")
    with pytest.raises(UnsafePath):
        await index.index_file(1, SESSION, "../../server-secret.txt")
    with pytest.raises(UnsupportedDocument):
        await index.index_file(1, SESSION, "data.csv")


async def test_a_damaged_document_fails_alone_and_drops_its_old_passages(
    index: RagIndex, upload: Upload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(SESSION, "fine.txt", "Healthy otters.")
    upload(SESSION, "report.pdf", pdf_bytes(tmp_path, ["Narwhal census"]))
    await index.index_session(1, SESSION)
    assert len(await index.search(1, "narwhal")) == 1
    upload(SESSION, "report.pdf", b"%PDF-1.4 garbage")
    upload(SESSION, "bomb.docx", zip_bomb_bytes("word/document.xml", 5))
    outcomes = {o.source: o for o in await index.index_session(1, SESSION)}
    assert outcomes["uploads/report.pdf"].status == "failed"
    assert "zip bomb" in (outcomes["uploads/bomb.docx"].error or "")
    assert outcomes["uploads/fine.txt"].status == "unchanged"
    assert await index.search(1, "narwhal") == []
    assert len(await index.search(1, "otters")) == 1

    reads: list[str] = []
    original = index._read

    def counting_read(session_id: str, source: str) -> list[Section]:
        reads.append(source)
        return original(session_id, source)

    monkeypatch.setattr(index, "_read", counting_read)
    again = {o.source: o for o in await index.index_session(1, SESSION)}
    assert again["uploads/report.pdf"].status == "failed"  # remembered, not parsed again
    assert again["uploads/report.pdf"].error == outcomes["uploads/report.pdf"].error
    assert reads == []
    upload(SESSION, "report.pdf", pdf_bytes(tmp_path, ["Narwhal census, fixed"]))
    fixed = await index.index_file(1, SESSION, "report.pdf")
    assert (fixed.status, reads) == ("indexed", ["uploads/report.pdf"])
    assert len(await index.search(1, "narwhal")) == 1


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "NEAR(",
        "*",
        "-",
        "OR",
        "AND",
        "NOT",
        "(",
        ")",
        "^",
        "col:x",
        'a" OR "b',
        "x*",
        "NEAR(a b, 1)",
    ],
)
async def test_fts5_syntax_in_queries_never_raises(
    index: RagIndex, upload: Upload, query: str
) -> None:
    upload(SESSION, "doc.txt", "Near the river, or by the sea, a colony of puffins nests.")
    await index.index_session(1, SESSION)
    assert isinstance(await index.search(1, query), list)
    assert isinstance(await index.search(1, query + " puffins", session_id=SESSION), list)


async def test_empty_or_punctuation_queries_return_nothing(index: RagIndex, upload: Upload) -> None:
    upload(SESSION, "doc.txt", "Some text.")
    await index.index_session(1, SESSION)
    for query in ("", "   ", "?!.,;", "***"):
        assert await index.search(1, query) == []


async def test_a_file_changed_to_a_link_is_not_indexed(
    index: RagIndex, upload: Upload, tmp_path: Path
) -> None:
    path = upload(SESSION, "swap.txt", "Original lemur notes.")
    await index.index_session(1, SESSION)
    secret = tmp_path / "host.txt"
    secret.write_text("host file about wombats")
    os.unlink(path)
    path.symlink_to(secret)
    outcomes = await index.index_session(1, SESSION)
    assert [(o.source, o.status) for o in outcomes] == [("uploads/swap.txt", "removed")]
    assert await index.search(1, "wombats") == []


class ScriptedRunner(IsolatedRunner):
    """Runs calls in this process, recording them; the first `failures` raise instead."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__()
        self.failures = failures
        self.calls: list[str] = []

    def call(
        self,
        function: Callable[..., T],
        *args: Any,
        file: BinaryIO | None = None,
        network: bool = False,
    ) -> T:
        self.calls.append(args[-1])
        if self.failures:
            raise IsolatedCallFailed(self.failures.pop(0))
        return function(*((file,) if file is not None else ()), *args)


async def test_pdf_docx_and_html_are_parsed_in_the_helper(
    tmp_path: Path, workspaces: Workspaces, upload: Upload
) -> None:
    runner = ScriptedRunner(["the file crashed the reader"])  # the first crash is retried
    index = RagIndex(tmp_path, workspaces=workspaces, runner=runner)
    upload(SESSION, "a.pdf", pdf_bytes(tmp_path, ["Pelicans"]))
    upload(SESSION, "b.docx", docx_bytes([("body", "Pelicans too")]))
    upload(SESSION, "c.html", "<p>Pelicans</p>")
    upload(SESSION, "d.md", "Pelicans")
    upload(SESSION, "e.txt", "Pelicans")
    outcomes = await index.index_session(1, SESSION)
    assert {o.status for o in outcomes} == {"indexed"}
    assert runner.calls == ["uploads/a.pdf", "uploads/a.pdf", "uploads/b.docx", "uploads/c.html"]
    assert len(await index.search(1, "pelicans")) == 5


async def test_a_document_that_times_out_is_not_retried_at_once(
    tmp_path: Path, workspaces: Workspaces, upload: Upload
) -> None:
    runner = ScriptedRunner(["reading the file took longer than 120 s"])
    index = RagIndex(tmp_path, workspaces=workspaces, runner=runner)
    upload(SESSION, "huge.pdf", pdf_bytes(tmp_path, ["Pelicans"]))
    outcome = await index.index_file(1, SESSION, "huge.pdf")
    assert outcome.status == "failed" and "longer than 120 s" in (outcome.error or "")
    assert runner.calls == ["uploads/huge.pdf"]
