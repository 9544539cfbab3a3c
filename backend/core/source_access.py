"""Who may see a data source, and where it is: the base of the data source services.

A source is its owner's. Shared, it is read-only for the others: they may list it, read
its catalog, attach it and query it, and propose notes; only the owner changes, shares
or deletes it. Any other user's source, a deleted one and a made-up id are all "not
found" (`get`); a source shared with the user that they try to change is read-only
(`owned`).

The password is sealed with the server's key together with the host and port it was
given for, and opened only for that same host and port (`_address`), so a stored
password is never sent elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from backend.config import Settings
from backend.core.governor import Governor
from backend.core.secret_box import SecretsUnreadable, seal, unseal
from backend.storage import DataSource, Store
from backend.storage.data_sources import SOURCES_FOLDER
from backend.tools.data_sources.catalog import Catalog, note_map
from backend.tools.data_sources.query import FILE_KINDS, SourceAddress
from backend.tools.data_sources.readers import SourceReaders


class SourceNotFound(LookupError):
    """No source of that id that this user may see."""


class SourceReadOnly(PermissionError):
    """A source shared with this user, which only its owner may change."""


class SourceInvalid(ValueError):
    """What the user gave cannot make a source; the message says why, `param` which field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def source_folder(data_dir: Path, source: DataSource) -> Path:
    return data_dir / SOURCES_FOLDER / f"u{source.user_id}-{source.id}"


class SourceAccess:
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

    def _groups(self, user_id: int) -> list[int]:
        return [group.id for group in self.store.groups_of(user_id)]

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

    @staticmethod
    def catalog(source: DataSource) -> Catalog:
        return Catalog.from_json(source.catalog)

    def notes(
        self, source: DataSource, status: Literal["accepted", "proposed"] = "accepted"
    ) -> dict[str, str]:
        return note_map(
            [(n.target, n.note) for n in self.store.source_notes(source.id) if n.status == status]
        )
