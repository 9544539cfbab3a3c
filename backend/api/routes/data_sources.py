"""Data sources: a user's read-only databases, their catalogs and notes, sharing, the
sessions that attach them, and queries on them. Another user's source is "not found"."""

from __future__ import annotations

import contextlib
import io
from typing import Annotated

import pyarrow as pa  # type: ignore[import-untyped]
from fastapi import APIRouter, Response, status
from fastapi import Path as PathParam

from backend.api.deps import (
    CurrentUser,
    DataSourcesDep,
    FilesDep,
    RecordId,
    StoreDep,
    opened_session,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.data_sources import DataSources, SourceSpec
from backend.models.common import SessionId
from backend.models.data_sources import (
    ColumnPublic,
    DataSourceChange,
    DataSourceCreate,
    DataSourceDetail,
    DataSourcePublic,
    NoteAccept,
    NotePublic,
    NoteWrite,
    QueryRequest,
    QueryResult,
    SessionSources,
    SharesUpdate,
    TablePublic,
    VerifiedAnswerPublic,
)
from backend.storage import DataSource, Store, User
from backend.storage.data_sources import VerifiedAnswer
from backend.storage.sessions import session_key

router = APIRouter(prefix="/api", tags=["data-sources"], responses=CLIENT_ERRORS)
SourceId = Annotated[str, PathParam(max_length=64)]
JSON_MAX_BYTES = 16 * 1024**2  # of a query's rows (as Arrow holds them) sent back as JSON


def _public(store: Store, user: User, source: DataSource) -> DataSourcePublic:
    owner = store.get_user_by_id(source.user_id)
    owned = source.user_id == user.id
    shared_with: list[str] = []
    shared_groups: list[str] = []
    if owned:
        names = (store.get_user_by_id(user_id) for user_id in source.shared_with)
        shared_with = [found.username for found in names if found is not None]
        groups = (store.get_group(group_id) for group_id in source.shared_groups)
        shared_groups = [group.name for group in groups if group is not None]
    return DataSourcePublic(
        id=source.id,
        name=source.name,
        kind=source.kind,
        description=source.description,
        host=source.host,
        port=source.port,
        database=source.database_name,
        username=source.username,
        has_password=bool(source.sealed_secrets),
        owner=owner.username if owner else "",
        owned=owned,
        shared_with=shared_with,
        shared_groups=shared_groups,
        shared_with_everyone=source.shared_with_all,
        tables=len(DataSources.catalog(source).tables),
        catalog_at=source.catalog_at,
        created_at=source.created_at,
    )


def _detail(store: Store, sources: DataSources, user: User, source: DataSource) -> DataSourceDetail:
    notes = sources.notes(source)
    catalog = [
        TablePublic(
            name=table.name,
            kind=table.kind,
            rows=table.rows,
            note=notes.get(table.name, ""),
            columns=[
                ColumnPublic(
                    name=column.name,
                    type=column.type,
                    key=column.key,
                    references=column.references,
                    samples=column.samples,
                    note=notes.get(f"{table.name}.{column.name}", ""),
                )
                for column in table.columns
            ],
        )
        for table in DataSources.catalog(source).tables
    ]
    shown = [NotePublic(target=t, note=n, status="accepted") for t, n in notes.items()]
    # Proposals: the owner's to accept, and each proposer sees their own.
    shown += [
        NotePublic(target=note.target, note=note.note, status="proposed")
        for note in store.source_notes(source.id)
        if note.status == "proposed" and user.id in (source.user_id, note.author_id)
    ]
    return DataSourceDetail(
        **_public(store, user, source).model_dump(), catalog=catalog, notes=shown
    )


def _spec(body: DataSourceChange) -> SourceSpec:
    return SourceSpec(
        name=body.name,
        kind=body.kind if isinstance(body, DataSourceCreate) else None,
        description=body.description,
        host=body.host,
        port=body.port,
        database=body.database,
        username=body.username,
        password=body.password,
    )


@router.get("/data-sources")
def read_data_sources(
    store: StoreDep, sources: DataSourcesDep, user: CurrentUser
) -> list[DataSourcePublic]:
    """List the data sources you own or that are shared with you."""
    return [_public(store, user, source) for source in sources.visible(user.id)]


@router.post("/data-sources", status_code=status.HTTP_201_CREATED)
async def create_data_source(
    body: DataSourceCreate,
    store: StoreDep,
    sources: DataSourcesDep,
    files: FilesDep,
    user: CurrentUser,
) -> DataSourceDetail:
    """Register a read-only database (its account is checked: it may only read), a SQLite
    or DuckDB file uploaded with POST /v1/files, or a dataset made of uploaded files (a
    table each); its catalog is read at once."""
    with contextlib.ExitStack() as held:
        database_file = None
        if body.file_id is not None:
            database_file = held.enter_context(files.open(user.id, body.file_id))
        dataset = [
            (files.get(user.id, file_id).filename, held.enter_context(files.open(user.id, file_id)))
            for file_id in body.file_ids or ()
        ]
        source = await sources.create(user, _spec(body), database_file, dataset)
    return _detail(store, sources, user, source)


@router.get("/data-sources/{source_id}")
def read_data_source(
    source_id: SourceId, store: StoreDep, sources: DataSourcesDep, user: CurrentUser
) -> DataSourceDetail:
    """One data source with its catalog and notes (and, for its owner, proposed notes)."""
    return _detail(store, sources, user, sources.get(user.id, source_id))


@router.patch("/data-sources/{source_id}")
async def update_data_source(
    source_id: SourceId,
    body: DataSourceChange,
    store: StoreDep,
    sources: DataSourcesDep,
    user: CurrentUser,
) -> DataSourceDetail:
    """Change your data source; a new host or port drops the password unless given again."""
    source = await sources.change(user.id, source_id, _spec(body))
    return _detail(store, sources, user, source)


@router.delete("/data-sources/{source_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_data_source(
    source_id: SourceId, sources: DataSourcesDep, user: CurrentUser
) -> Response:
    """Delete your data source: it is gone from every conversation that attached it."""
    await sources.delete(user.id, source_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/data-sources/{source_id}/refresh")
async def refresh_data_source(
    source_id: SourceId, store: StoreDep, sources: DataSourcesDep, user: CurrentUser
) -> DataSourceDetail:
    """Read the source's catalog again: tables, columns, keys, row estimates, samples."""
    await sources.refresh(user.id, source_id)
    return _detail(store, sources, user, sources.get(user.id, source_id))


@router.put("/data-sources/{source_id}/shares")
def share_data_source(
    source_id: SourceId,
    body: SharesUpdate,
    store: StoreDep,
    sources: DataSourcesDep,
    user: CurrentUser,
) -> DataSourcePublic:
    """Share your data source read-only with these users, your groups' members (an admin:
    any group's), or (an admin) everyone."""
    shared = sources.share(user, source_id, body.users, body.everyone, body.groups)
    return _public(store, user, shared)


@router.put("/data-sources/{source_id}/notes")
def write_note(
    source_id: SourceId, body: NoteWrite, sources: DataSourcesDep, user: CurrentUser
) -> NotePublic:
    """Write a note on the source, a table or a column (an empty note removes it). The
    owner's note counts at once; anyone else's is proposed to the owner."""
    status_ = sources.write_note(user.id, source_id, body.target, body.note)
    return NotePublic(target=body.target, note=body.note.strip(), status=status_)  # type: ignore[arg-type]


@router.post("/data-sources/{source_id}/notes/accept")
def accept_note(
    source_id: SourceId, body: NoteAccept, sources: DataSourcesDep, user: CurrentUser
) -> NotePublic:
    """Accept the note proposed on a target of your data source."""
    sources.accept_note(user.id, source_id, body.target)
    note = sources.notes(sources.get(user.id, source_id)).get(body.target, "")
    return NotePublic(target=body.target, note=note, status="accepted")


@router.post("/data-sources/{source_id}/query")
async def query_data_source(
    source_id: SourceId, body: QueryRequest, sources: DataSourcesDep, user: CurrentUser
) -> QueryResult:
    """Run one read-only query; at most `max_rows` rows come back as JSON."""
    source = sources.get(user.id, source_id)
    sink = io.BytesIO()
    answer = await sources.query(
        user.id, source, body.sql, sink, max_rows=body.max_rows, max_bytes=JSON_MAX_BYTES
    )
    table = pa.ipc.open_stream(sink.getvalue()).read_all()
    rows = [list(row.values()) for row in table.to_pylist()]
    return QueryResult(
        columns=answer.columns, rows=rows, row_count=answer.rows, truncated=answer.truncated
    )


@router.get("/sessions/{session_id}/data-sources")
def read_session_sources(
    session_id: SessionId, store: StoreDep, sources: DataSourcesDep, user: CurrentUser
) -> list[DataSourcePublic]:
    """The data sources this conversation attached (none for a session not started yet)."""
    key = session_key(user.id, session_id)
    if store.session_owner(key) != user.id:
        return []
    return [_public(store, user, source) for source in sources.attached(key)]


@router.put("/sessions/{session_id}/data-sources")
def attach_session_sources(
    session_id: SessionId,
    body: SessionSources,
    store: StoreDep,
    sources: DataSourcesDep,
    user: CurrentUser,
) -> list[DataSourcePublic]:
    """Attach exactly these data sources to the conversation (a new one is started)."""
    key = opened_session(store, user, session_id)
    return [_public(store, user, s) for s in sources.attach(user.id, key, body.source_ids)]


def _verified(store: Store, answer: VerifiedAnswer) -> VerifiedAnswerPublic:
    by = store.get_user_by_id(answer.user_id)
    return VerifiedAnswerPublic(
        id=answer.id,
        source_id=answer.source_id,
        question=answer.question,
        answer=answer.answer,
        code=answer.code,
        queries=answer.queries,
        verified_by=by.username if by else "",
        created_at=answer.created_at,
    )


@router.post(
    "/conversations/{conversation_id}/messages/{message_id}/verified",
    status_code=status.HTTP_201_CREATED,
)
def verify_answer(
    conversation_id: Annotated[str, PathParam(max_length=64)],
    message_id: RecordId,
    store: StoreDep,
    sources: DataSourcesDep,
    user: CurrentUser,
) -> list[VerifiedAnswerPublic]:
    """Mark an answer as verified: its question, code and queries are kept on each data
    source it queried, as a worked example for later questions about it."""
    conversation = store.get_conversation(user.id, conversation_id)
    messages = {m.id: m for m in store.list_messages(conversation_id)} if conversation else {}
    message = messages.get(message_id)
    if conversation is None or message is None or message.role != "assistant":
        raise ApiError(404, "Message not found in this conversation.", code="message_not_found")
    asked = messages.get(message.parent_id) if message.parent_id is not None else None
    code = [str(c) for c in message.metadata.get("code", []) if isinstance(c, str)]
    kept = sources.verify(
        user.id, conversation.session_key, asked.content if asked else "", message.content, code
    )
    return [_verified(store, answer) for answer in kept]


@router.get("/data-sources/{source_id}/verified-answers")
def read_verified_answers(
    source_id: SourceId, store: StoreDep, sources: DataSourcesDep, user: CurrentUser
) -> list[VerifiedAnswerPublic]:
    """The answers verified on this source (its owner sees all; others, their own)."""
    return [_verified(store, answer) for answer in sources.verified(user.id, source_id)]


@router.delete(
    "/data-sources/{source_id}/verified-answers/{answer_id}",
    status_code=status.HTTP_204_NO_CONTENT,
)
def withdraw_verified_answer(
    source_id: SourceId,
    answer_id: Annotated[str, PathParam(max_length=64)],
    sources: DataSourcesDep,
    user: CurrentUser,
) -> Response:
    """Withdraw a verified answer: no later question gets it as an example."""
    sources.withdraw(user.id, source_id, answer_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
