"""Schemas of data sources: what a user registers, changes and reads back.

The password goes in and never comes out: `DataSourcePublic` says only whether one is
kept (`has_password`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from backend.models.common import Text
from backend.storage.data_sources import SOURCE_NAME_PATTERN

SourceName = Annotated[str, StringConstraints(pattern=SOURCE_NAME_PATTERN)]
Short = Annotated[Text, StringConstraints(max_length=255)]
Username = Annotated[Text, StringConstraints(min_length=1, max_length=150)]
Target = Annotated[Text, StringConstraints(max_length=300)]
SourceId = Annotated[str, StringConstraints(max_length=64)]
# The /v1 extension field: sources to attach to the request's session.
DataSourceIds = list[SourceId] | None


class DataSourceChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: SourceName | None = Field(default=None, description="how code names it: sql(name, query)")
    description: Annotated[Text, StringConstraints(max_length=4000)] | None = None
    host: Short | None = Field(default=None, description="a database server's host")
    port: int | None = Field(default=None, ge=0, le=65535, description="0: the kind's default")
    database: Short | None = None
    username: Short | None = None
    password: Annotated[Text, StringConstraints(max_length=1024)] | None = Field(
        default=None,
        description="stored sealed, bound to the host and port it is given with, never shown"
        " back; changing the host or port without giving it again drops it",
    )


class DataSourceCreate(DataSourceChange):
    name: SourceName = Field(description="how code names it: sql(name, query)")
    kind: Literal["postgresql", "mysql", "sqlite", "duckdb", "dataset"]
    file_id: Annotated[str, StringConstraints(max_length=100)] | None = Field(
        default=None,
        description="sqlite and duckdb: the database file, uploaded with POST /v1/files",
    )
    file_ids: list[Annotated[str, StringConstraints(max_length=100)]] | None = Field(
        default=None,
        max_length=32,
        description="dataset: the CSV, TSV, Parquet, JSON or JSON Lines files uploaded with"
        " POST /v1/files, each a table",
    )


class ColumnPublic(BaseModel):
    name: str
    type: str
    key: str = ""
    references: str = ""
    samples: list[str] = []
    note: str = ""


class TablePublic(BaseModel):
    name: str
    kind: str
    rows: int | None
    note: str = ""
    columns: list[ColumnPublic]


class NotePublic(BaseModel):
    target: str
    note: str
    status: Literal["accepted", "proposed"]


class DataSourcePublic(BaseModel):
    id: str
    name: str
    kind: str
    description: str
    host: str
    port: int
    database: str
    username: str
    has_password: bool
    owner: str
    owned: bool  # whether the caller owns it (else it is shared with them, read-only)
    shared_with: list[str]  # the owner sees whom; others see []
    shared_groups: list[str]  # the owner sees which groups; others see []
    shared_with_everyone: bool
    tables: int
    catalog_at: float | None
    created_at: float


class DataSourceDetail(DataSourcePublic):
    catalog: list[TablePublic]
    notes: list[NotePublic]


class SharesUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[Username] | None = Field(default=None, max_length=1000)
    groups: list[Annotated[Text, StringConstraints(max_length=100)]] | None = Field(
        default=None, max_length=200, description="groups you are in (an admin: any group)"
    )
    everyone: bool | None = Field(default=None, description="an admin's choice only")


class NoteWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: Target = Field(description='"" for the source, "table", or "table.column"')
    note: Annotated[Text, StringConstraints(max_length=4000)]


class NoteAccept(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: Target


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: Annotated[Text, StringConstraints(min_length=1, max_length=100_000)]
    max_rows: int = Field(default=100, ge=1, le=10_000)


class QueryResult(BaseModel):
    columns: list[str]
    rows: list[list[object]]
    row_count: int
    truncated: bool


class SessionSources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_ids: list[SourceId] = Field(max_length=64)


class VerifiedAnswerPublic(BaseModel):
    id: str
    source_id: str
    question: str
    answer: str
    code: str
    queries: list[str]
    verified_by: str
    created_at: float
