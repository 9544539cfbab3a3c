"""Data sources: registering a user's read-only databases (a server, a database file, or
a dataset made of uploaded files), changing, sharing and deleting them, and reading their
catalogs. `DataSources` is the whole service: it stands on who may see a source
(`source_access.py`), queries (`source_queries.py`), notes (`source_notes.py`) and the
sessions that attach sources (`source_sessions.py`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from starlette.concurrency import run_in_threadpool

from backend.core.source_access import SourceInvalid, source_folder
from backend.core.source_sessions import SessionSources
from backend.files.databases import DATASET_READERS
from backend.storage import DataSource, User
from backend.storage.data_sources import SOURCE_NAME_PATTERN, SourceKind, SourceNameTaken
from backend.tools.data_sources.catalog import Catalog
from backend.tools.data_sources.files import build_dataset
from backend.tools.data_sources.query import FILE_KINDS, NETWORK_KINDS, AccountRefused, QueryFailed
from backend.tools.data_sources.readers import SourceConnection

BUILD_KIND = "dataset_build"
DATASET_ROOM = 2  # times the files' size the quota must have room for, to make a dataset
MAX_TABLES = 2000  # a catalog lists at most this many tables
SAMPLE_TABLES = 500  # and reads samples of at most this many
_NAME = re.compile(SOURCE_NAME_PATTERN)
_HOST = re.compile(r"^[A-Za-z0-9.:_-]{1,253}$")


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


class DataSources(SessionSources):
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
