"""Data sources: a user's read-only databases, whom they are shared with, their catalogs
and notes, the sessions that attach them, and the queries run on them.

A source is its owner's. Shared, it is read-only for the others: they may list it, read
its catalog, attach it and query it, and propose notes; only the owner changes, shares
or deletes it (an admin alone may share with everyone). Any other user's source, a
deleted one and a made-up id are all "not found".

The password is sealed with the server's key together with the host and port it was
given for, and opened only for that same host and port: a change of either drops it
unless the same change gives it again, so a stored password is never sent elsewhere.

Every query (from a run's `sql()`, the API or MCP) takes a `source_query` place from
the governor: places per user and on the server, and the time the database is given.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

from starlette.concurrency import run_in_threadpool

from backend.config import Settings
from backend.core.governor import Governor
from backend.core.limits import LimitReached
from backend.core.secret_box import SecretsUnreadable, seal, unseal
from backend.files.databases import DATASET_READERS
from backend.storage import DataSource, Store, User
from backend.storage.data_sources import (
    SOURCE_NAME_PATTERN,
    SOURCES_FOLDER,
    SourceKind,
    SourceNameTaken,
    VerifiedAnswer,
)
from backend.storage.sessions import SessionKey, owner_of
from backend.tools.data_sources.catalog import Catalog, describe, nearest, note_map, pick_tables
from backend.tools.data_sources.examples import (
    Example,
    SourcesPrompt,
    most_similar,
    queries_in,
)
from backend.tools.data_sources.examples import describe as describe_examples
from backend.tools.data_sources.files import build_dataset
from backend.tools.data_sources.query import (
    FILE_KINDS,
    NETWORK_KINDS,
    AccountRefused,
    QueryAnswer,
    QueryFailed,
    QueryLimits,
    Sink,
    SourceAddress,
    copy_capped,
)
from backend.tools.data_sources.readers import SourceConnection, SourceReaders
from backend.tools.sandbox.data_channel import QueryRefused, SocketSink

logger = logging.getLogger(__name__)

WORK_KIND = "source_query"
BUILD_KIND = "dataset_build"
DATASET_ROOM = 2  # times the files' size the quota must have room for, to make a dataset
MAX_TABLES = 2000  # a catalog lists at most this many tables
SAMPLE_TABLES = 500  # and reads samples of at most this many
MAX_SQL = 100_000
STATEMENT_SHARE = 0.8  # of the source_query place's seconds, for the statement itself
LISTED_TABLES = 30  # a session's listing names at most this many tables of a source
_NAME = re.compile(SOURCE_NAME_PATTERN)
_HOST = re.compile(r"^[A-Za-z0-9.:_-]{1,253}$")


class SourceNotFound(LookupError):
    """No source of that id that this user may see."""


class SourceReadOnly(PermissionError):
    """A source shared with this user, which only its owner may change."""


class SourceInvalid(ValueError):
    """What the user gave cannot make a source; the message says why, `param` which field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class SourceSpec:
    """What a user gives to register a source, or to change one (None: unchanged)."""

    name: str | None = None
    kind: SourceKind | None = None
    description: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None
    username: str | None = None
    password: str | None = None


def source_folder(data_dir: Path, source: DataSource) -> Path:
    return data_dir / SOURCES_FOLDER / f"u{source.user_id}-{source.id}"


class DataSources:
    def __init__(
        self,
        store: Store,
        secret_key: str,
        readers: SourceReaders,
        governor: Governor,
        settings: Settings,
        disk_left: Callable[[int], int],
    ) -> None:
        """`disk_left(user id)`: the bytes the user's disk quota has room for."""
        self.disk_left = disk_left
        self.store = store
        self.secret_key = secret_key
        self.readers = readers
        self.governor = governor
        self.data_dir = settings.DATA_DIR
        self.max_rows = settings.SOURCE_QUERY_MAX_ROWS
        self.max_bytes = int(settings.SOURCE_QUERY_MAX_MB * 1024**2)

    # Who sees what --------------------------------------------------------------------

    def visible(self, user_id: int) -> list[DataSource]:
        return self.store.visible_sources(user_id)

    def get(self, user_id: int, source_id: str) -> DataSource:
        source = self.store.get_source(source_id)
        if source is None or not source.visible_to(user_id, self._groups(user_id)):
            raise SourceNotFound(source_id)
        return source

    def owned(self, user_id: int, source_id: str) -> DataSource:
        source = self.get(user_id, source_id)
        if source.user_id != user_id:
            raise SourceReadOnly(
                "this source is shared with you read-only: only its owner changes it"
            )
        return source

    # Registering and changing ----------------------------------------------------------

    def _checked(self, spec: SourceSpec, kind: SourceKind) -> None:
        if spec.name is not None and not _NAME.fullmatch(spec.name):
            raise SourceInvalid(
                "a source's name starts with a letter and has only letters, digits and _"
                " (at most 64): code names it in sql(name, query)",
                "name",
            )
        if kind in NETWORK_KINDS:
            if spec.host is not None and not _HOST.fullmatch(spec.host):
                raise SourceInvalid("the host is a name or an address", "host")
            if spec.port is not None and not 0 <= spec.port <= 65535:
                raise SourceInvalid("the port is between 1 and 65535 (0: the default)", "port")

    def _address(self, source: DataSource) -> SourceAddress:
        password = ""
        if source.sealed_secrets:
            try:
                sealed = unseal(source.sealed_secrets, self.secret_key)
            except SecretsUnreadable:
                sealed = {}
            # Bound to where it was given for: another host never receives it.
            if sealed.get("host") == source.host and sealed.get("port") == str(source.port):
                password = sealed.get("password", "")
        path = None
        if source.kind in FILE_KINDS:
            path = source_folder(self.data_dir, source) / "database"
        return SourceAddress(
            kind=source.kind,
            host=source.host,
            port=source.port,
            database=source.database_name,
            username=source.username,
            password=password,
            path=path,
        )

    def _sealed(self, password: str, host: str, port: int) -> str:
        if not password:
            return ""
        return seal({"password": password, "host": host, "port": str(port)}, self.secret_key)

    async def create(
        self,
        user: User,
        spec: SourceSpec,
        database_file: BinaryIO | None = None,
        dataset_files: Sequence[tuple[str, BinaryIO]] = (),
    ) -> DataSource:
        """Register a source: a network database (checked by connecting: the account may
        only read), a database file (`database_file`, hard-linked into the source's
        folder, so it is counted once), or a dataset made of uploaded files
        (`dataset_files`: name and handle, each a table). Then its catalog is read."""
        kind = spec.kind
        if kind is None or kind not in (*NETWORK_KINDS, *FILE_KINDS):
            raise SourceInvalid("kind is postgresql, mysql, sqlite, duckdb or dataset", "kind")
        if not spec.name:
            raise SourceInvalid("a source needs a name", "name")
        self._checked(spec, kind)
        if kind in NETWORK_KINDS and not spec.host:
            raise SourceInvalid("a database server needs a host", "host")
        if kind in ("sqlite", "duckdb") and database_file is None:
            raise SourceInvalid("a database file source needs the file (file_id)", "file_id")
        if kind == "dataset":
            self._check_dataset(user.id, dataset_files)
        try:
            source = self.store.create_source(
                user.id,
                name=spec.name,
                kind=kind,
                description=spec.description or "",
                host=spec.host or "" if kind in NETWORK_KINDS else "",
                port=spec.port or 0,
                database_name=spec.database or "",
                username=spec.username or "",
                sealed_secrets=self._sealed(spec.password or "", spec.host or "", spec.port or 0),
                shared_with_all=False,
            )
        except SourceNameTaken:
            raise SourceInvalid(f"you have a source named {spec.name!r} already", "name") from None
        try:
            if database_file is not None:
                await run_in_threadpool(self._keep_file, user.id, source, database_file)
            if kind == "dataset":
                await self._build_dataset(user.id, source, dataset_files)
            await self.refresh(user.id, source.id, check_account=True)
        except BaseException:
            await self.delete(user.id, source.id)
            raise
        return self.get(user.id, source.id)

    def _check_dataset(self, user_id: int, files: Sequence[tuple[str, BinaryIO]]) -> None:
        if not files:
            raise SourceInvalid("a dataset is made of files: give their file_ids", "file_ids")
        kinds = ", ".join(sorted(DATASET_READERS))
        for name, _ in files:
            if name.rsplit(".", 1)[-1].lower() not in DATASET_READERS:
                raise SourceInvalid(f"{name!r}: a dataset is made of {kinds} files", "file_ids")
        # Counted before it is spent: DuckDB's copy is rarely larger than its files.
        size = sum(os.fstat(handle.fileno()).st_size for _, handle in files)
        if size * DATASET_ROOM > self.disk_left(user_id):
            raise SourceInvalid("your disk quota has no room for this dataset", "file_ids")

    async def _build_dataset(
        self, user_id: int, source: DataSource, files: Sequence[tuple[str, BinaryIO]]
    ) -> None:
        folder = source_folder(self.data_dir, source)
        await run_in_threadpool(functools.partial(folder.mkdir, mode=0o700, parents=True))
        async with self.governor.hold(BUILD_KIND, user_id) as held:
            try:
                await held.run(
                    build_dataset, folder, files, self.readers.confine, held.seconds, native=True
                )
            except QueryFailed as failed:
                raise SourceInvalid(str(failed), "file_ids") from None

    def _keep_file(self, user_id: int, source: DataSource, database_file: BinaryIO) -> None:
        folder = source_folder(self.data_dir, source)
        folder.mkdir(mode=0o700, parents=True)
        target = folder / "database"
        try:  # the same bytes as the user's file: counted once
            os.link(f"/proc/self/fd/{database_file.fileno()}", target)
            return
        except OSError:
            pass
        size = os.fstat(database_file.fileno()).st_size
        if size > self.disk_left(user_id):
            raise SourceInvalid("your disk quota has no room for a copy of this file", "file_id")
        with open(target, "xb") as copy:
            shutil.copyfileobj(database_file, copy)

    async def change(self, user_id: int, source_id: str, spec: SourceSpec) -> DataSource:
        source = self.owned(user_id, source_id)
        self._checked(spec, source.kind)
        fields: dict[str, Any] = {}
        for field, column in (
            ("name", "name"),
            ("description", "description"),
            ("host", "host"),
            ("port", "port"),
            ("database", "database_name"),
            ("username", "username"),
        ):
            value = getattr(spec, field)
            if value is not None and (
                source.kind in NETWORK_KINDS or field in ("name", "description")
            ):
                fields[column] = value
        host = fields.get("host", source.host)
        port = fields.get("port", source.port)
        if spec.password is not None:
            fields["sealed_secrets"] = self._sealed(spec.password, host, port)
        elif (host, port) != (source.host, source.port):
            fields["sealed_secrets"] = ""  # bound to the old host: given again, or gone
        reached = {"host", "port", "database_name", "username", "sealed_secrets"} & set(fields)
        catalog = None
        if reached:  # the new address is read before anything changes: a refusal keeps the old
            catalog = await self._read_catalog(user_id, replace(source, **fields), True)
        try:
            self.store.update_source(source.id, **fields)
        except SourceNameTaken:
            raise SourceInvalid(f"you have a source named {spec.name!r} already", "name") from None
        if catalog is not None:
            self.store.set_source_catalog(source.id, catalog.to_json())
        return self.get(user_id, source.id)

    def _groups(self, user_id: int) -> list[int]:
        return [group.id for group in self.store.groups_of(user_id)]

    def share(
        self,
        user: User,
        source_id: str,
        usernames: Sequence[str] | None,
        everyone: bool | None,
        group_names: Sequence[str] | None = None,
    ) -> DataSource:
        """Share with exactly these users, these groups (the owner's own groups; an
        admin's, any), or everyone (an admin only); None leaves that part as it is."""
        source = self.owned(user.id, source_id)
        if group_names is not None:
            groups = {group.name: group for group in self.store.list_groups()}
            mine = set(self._groups(user.id))
            ids = []
            for name in group_names:
                group = groups.get(name)
                if group is None or not (user.is_admin or group.id in mine):
                    raise SourceInvalid(f"you are in no group {name!r}", "groups")
                ids.append(group.id)
            self.store.set_source_groups(source.id, ids)
        if everyone is not None:
            if everyone and not user.is_admin:
                raise SourceInvalid("only an admin shares a source with everyone", "everyone")
            self.store.update_source(source.id, shared_with_all=everyone)
        if usernames is not None:
            ids = []
            for username in usernames:
                found = self.store.get_user(username)
                if found is None:
                    raise SourceInvalid(f"there is no user {username!r}", "users")
                if found.id != user.id:
                    ids.append(found.id)
            self.store.set_source_shares(source.id, ids)
        return self.get(user.id, source.id)

    async def delete(self, user_id: int, source_id: str) -> None:
        source = self.owned(user_id, source_id)
        self.store.delete_source(source.id)
        folder = source_folder(self.data_dir, source)
        await run_in_threadpool(self.readers.forget, folder)
        await run_in_threadpool(shutil.rmtree, folder, True)

    # Catalog and notes -------------------------------------------------------------------

    async def refresh(self, user_id: int, source_id: str, check_account: bool = False) -> Catalog:
        """Read the source's catalog again (tables, columns, keys, samples) and keep it."""
        source = self.get(user_id, source_id)
        catalog = await self._read_catalog(user_id, source, check_account)
        self.store.set_source_catalog(source.id, catalog.to_json())
        return catalog

    async def _read_catalog(self, user_id: int, source: DataSource, check_account: bool) -> Catalog:
        address = self._address(source)

        def read(connection: SourceConnection, held: Any) -> Catalog:
            if check_account:
                connection.check_account()
            catalog = connection.catalog(MAX_TABLES)
            tables = [
                connection.samples(table, 10) if index < SAMPLE_TABLES else table
                for index, table in enumerate(catalog.tables)
            ]
            return Catalog(tables=tables)

        try:
            catalog: Catalog = await self._with_connection(user_id, source, address, read)
        except AccountRefused as refused:
            raise SourceInvalid(str(refused), "username") from None
        except QueryFailed as failed:
            raise SourceInvalid(f"the source could not be read: {failed}", "host") from None
        return catalog

    @staticmethod
    def catalog(source: DataSource) -> Catalog:
        return Catalog.from_json(source.catalog)

    def notes(
        self, source: DataSource, status: Literal["accepted", "proposed"] = "accepted"
    ) -> dict[str, str]:
        return note_map(
            [(n.target, n.note) for n in self.store.source_notes(source.id) if n.status == status]
        )

    def write_note(self, user_id: int, source_id: str, target: str, note: str) -> str:
        """The owner's note is kept as given; anyone else's (an agent's too) is proposed
        until the owner accepts it. Returns the note's status."""
        source = self.get(user_id, source_id)
        self._check_target(source, target)
        status: Literal["accepted", "proposed"] = (
            "accepted" if source.user_id == user_id else "proposed"
        )
        self.store.set_note(source.id, target, status, note.strip(), user_id)
        return status

    def propose_note(self, key: SessionKey, proposal: str) -> str:
        """An agent's note, "<source> <table>[.<column>]: <note>", on a source its session
        attached: kept as proposed, whoever owns the session; the answer is for the agent."""
        head, _, note = proposal.partition(":")
        name, _, target = head.strip().partition(" ")
        source = next((s for s in self.attached(key) if s.name == name), None)
        if source is None or not note.strip():
            names = ", ".join(s.name for s in self.attached(key))
            return f"Error: give <source> <table>[.<column>]: <note>, the source one of: {names}"
        try:
            self._check_target(source, target.strip())
        except SourceInvalid as exc:
            return f"Error: {exc}"
        self.store.set_note(source.id, target.strip(), "proposed", note.strip(), owner_of(key))
        return f"Proposed to the owner of {source.name}: a note on {target.strip() or 'it'}."

    def accept_note(self, user_id: int, source_id: str, target: str) -> None:
        source = self.owned(user_id, source_id)
        proposed = self.notes(source, "proposed")
        if target not in proposed:
            raise SourceInvalid("no note is proposed there", "target")
        self.store.set_note(source.id, target, "accepted", proposed[target], user_id)
        self.store.set_note(source.id, target, "proposed", "", user_id)

    def _check_target(self, source: DataSource, target: str) -> None:
        if not target:
            return
        catalog = self.catalog(source)
        table_name, _, column = (
            target.partition(".") if catalog.table(target) is None else (target, "", "")
        )
        table = catalog.table(table_name)
        if table is None or (column and all(c.name != column for c in table.columns)):
            raise SourceInvalid(f"{target!r} is no table or table.column of this source", "target")

    # Sessions ----------------------------------------------------------------------------

    def attach(self, user_id: int, key: SessionKey, source_ids: Sequence[str]) -> list[DataSource]:
        sources = [self.get(user_id, source_id) for source_id in source_ids]
        self.store.attach_sources(key, [source.id for source in sources])
        return self.attached(key)

    def attached(self, key: SessionKey) -> list[DataSource]:
        """The session's sources that still exist and its owner may still see."""
        owner = owner_of(key)
        groups = self._groups(owner)
        return [s for s in self.store.attached_sources(key) if s.visible_to(owner, groups)]

    def listing(self, key: SessionKey) -> str:
        """The session's attached sources in a few lines: names, kinds and tables."""
        lines = []
        for source in self.attached(key):
            names = [table.name for table in self.catalog(source).tables]
            shown = ", ".join(names[:LISTED_TABLES])
            if len(names) > LISTED_TABLES:
                shown += f", … ({len(names)} tables)"
            lines.append(f"- data source {source.name!r} ({source.kind}): {shown or 'no tables'}")
        if not lines:
            return ""
        return "Attached data sources, queried with SQL from Python code:\n" + "\n".join(lines)

    def prompt_context(self, key: SessionKey, question: str) -> SourcesPrompt:
        """For the coder's prompt: each attached source's tables the question needs, with
        their notes, how to query them, and the verified answers most like the question."""
        attached = self.attached(key)
        parts = []
        for source in attached:
            notes = self.notes(source)
            picked = pick_tables(self.catalog(source), question, notes)
            header = f"Data source {source.name!r} ({source.kind}, read-only SQL)"
            if note := notes.get(""):
                header += f": {note}"
            body = describe(picked, notes) if picked else "(no table matches the question by name)"
            parts.append(f"{header}\n{body}")
        if not parts:
            return SourcesPrompt()
        usage = (
            "Query attached data sources with sql(source, query), which returns a pandas"
            " DataFrame; use only the tables and columns listed, and let the database"
            " filter, join and aggregate."
        )
        names = {source.id: source.name for source in attached}
        examples = most_similar(
            question,
            [
                Example(
                    id=answer.id,
                    source=names[answer.source_id],
                    question=answer.question,
                    code=answer.code,
                    queries=answer.queries,
                )
                for answer in self.store.verified_answers(list(names))
            ],
        )
        if examples:
            parts.append(describe_examples(examples))
        return SourcesPrompt(text=usage + "\n\n" + "\n\n".join(parts), examples=examples)

    # Verified answers ----------------------------------------------------------------------

    def verify(
        self, user_id: int, key: SessionKey, question: str, answer: str, code: Sequence[str]
    ) -> list[VerifiedAnswer]:
        """Keep a checked answer on each attached source its code queried: its question,
        its code and those queries."""
        written = "\n\n".join(code)
        queried: dict[str, list[str]] = {}
        for name, sql in queries_in(written):
            queried.setdefault(name, []).append(sql)
        kept = []
        for source in self.attached(key):
            if source.name not in queried:
                continue
            same = [  # marked again: the one kept already
                found
                for found in self.store.verified_answers([source.id])
                if (found.question, found.code) == (question, written)
            ]
            kept.append(
                same[0]
                if same
                else self.store.add_verified_answer(
                    source.id, user_id, question, answer, written, queried[source.name]
                )
            )
        if not kept:
            raise SourceInvalid(
                "this answer ran no query on a data source of this conversation", "message_id"
            )
        return kept

    def verified(self, user_id: int, source_id: str) -> list[VerifiedAnswer]:
        """The source's verified answers: all of them for its owner, one's own for others."""
        source = self.get(user_id, source_id)
        answers = self.store.verified_answers([source.id])
        if source.user_id == user_id:
            return answers
        return [answer for answer in answers if answer.user_id == user_id]

    def withdraw(self, user_id: int, source_id: str, answer_id: str) -> None:
        """The owner withdraws any; whoever verified an answer, their own."""
        if not any(answer.id == answer_id for answer in self.verified(user_id, source_id)):
            raise SourceNotFound(answer_id)
        self.store.delete_verified_answer(source_id, answer_id)

    # Queries -----------------------------------------------------------------------------

    def _limits(self, seconds: float, max_rows: int = 0, max_bytes: int = 0) -> QueryLimits:
        """The database's own timeout comes first, so its words say what stopped the query;
        the governor's is the backstop (a 503)."""
        rows = min(max_rows, self.max_rows) if max_rows else self.max_rows
        size = min(max_bytes, self.max_bytes) if max_bytes else self.max_bytes
        return QueryLimits(seconds=seconds * STATEMENT_SHARE, max_rows=rows, max_bytes=size)

    async def _with_connection(
        self, user_id: int, source: DataSource, address: SourceAddress, work: Any
    ) -> Any:
        async with self.governor.hold(WORK_KIND, user_id) as held:
            connection: SourceConnection | None = None

            def run() -> Any:
                nonlocal connection
                connection = self.readers.take(source.id, address)
                return work(connection, held)

            def interrupt() -> None:
                if connection is not None:
                    connection.cancel()

            try:
                return await held.run(run, interrupt=interrupt, native=True)
            finally:
                if connection is not None:
                    self.readers.give_back(source.id, address, connection)

    async def query(
        self,
        user_id: int,
        source: DataSource,
        sql: str,
        sink: Sink,
        max_rows: int = 0,
        max_bytes: int = 0,
    ) -> QueryAnswer:
        """Run `sql` on `source` for `user_id`, its rows (at most `max_rows` if given)
        written to `sink` as an Arrow stream. `QueryRefused` (with the catalog's nearest
        names) if it fails."""
        if not sql.strip() or len(sql) > MAX_SQL:
            raise QueryRefused(f"a query is 1 to {MAX_SQL:,} characters")
        address = self._address(source)

        def work(connection: SourceConnection, held: Any) -> QueryAnswer:
            limits = self._limits(held.seconds, max_rows, max_bytes)
            rows = connection.query(sql, limits)
            try:
                return copy_capped(rows, limits, sink)
            finally:
                connection.end()

        try:
            answer: QueryAnswer = await self._with_connection(user_id, source, address, work)
        except QueryFailed as failed:
            names = (
                nearest(self.catalog(source), failed.missing, failed.missing_in)
                if failed.missing
                else []
            )
            raise QueryRefused(str(failed), names) from None
        return answer

    async def answer_run(
        self, key: SessionKey, name: str, sql: str, sink: SocketSink
    ) -> dict[str, Any]:
        """A run's `sql(name, query)`: on the source of that name its session attached."""
        attached = self.attached(key)
        source = next((s for s in attached if s.name == name), None)
        if source is None:
            names = ", ".join(repr(s.name) for s in attached) or "none"
            raise QueryRefused(
                f"no data source {name!r} is attached to this conversation (attached: {names})"
            )
        try:
            answer = await self.query(owner_of(key), source, sql, sink)
        except LimitReached as refused:
            raise QueryRefused(refused.message) from None
        return {"rows": answer.rows, "truncated": answer.truncated, "columns": answer.columns}
