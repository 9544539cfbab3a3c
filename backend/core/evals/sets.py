"""A user's evaluation sets: the starter set, or one imported in DABench's format.

A set's questions are stored in its row; its files in its own folder, counted in the
user's disk quota before they are written (`EvalSetFiles`). The starter set's files
are the server's, written once and shared by every user's starter set. Another user's
set, a deleted one and a made-up id are all `EvalSetNotFound`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from starlette.concurrency import run_in_threadpool

from backend.core.evals.dabench import InvalidEvalSet, read_dabench
from backend.core.evals.questions import EvalQuestion, question_from_dict, question_to_dict
from backend.core.evals.starter import STARTER_SET_NAME, write_starter
from backend.core.limits import LimitReached, Limits
from backend.storage import Store, User
from backend.storage.eval_files import SET_ID, EvalSetFiles
from backend.storage.evals import EvalSetRow
from backend.storage.workspaces import FileTooLarge, UnsafePath, safe_filename

STARTER_VERSION = "1"  # a new version of the starter set's files gets a new folder
STARTER_QUESTIONS = "questions.json"  # beside its files: their questions and answers
MAX_TABLES = 200
MAX_SETS = 50  # a user's sets; one more is refused until they delete one
MEGABYTE = 1024 * 1024


class EvalSetNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Upload:
    """A file of an imported set, as the request gave it."""

    name: str
    source: BinaryIO
    size: int


def new_set_id() -> str:
    return f"es_{uuid.uuid4().hex}"


def questions_of(row: EvalSetRow) -> list[EvalQuestion]:
    return [question_from_dict(q) for q in row.questions]


class EvalSets:
    def __init__(self, store: Store, files: EvalSetFiles, limits: Limits, max_file_bytes: int):
        self.store = store
        self.files = files
        self.limits = limits
        self.max_file_bytes = max_file_bytes
        self._starter_lock = asyncio.Lock()

    def get(self, user_id: int, set_id: str) -> EvalSetRow:
        row = self.store.get_eval_set(user_id, set_id) if SET_ID.fullmatch(set_id) else None
        if row is None:
            raise EvalSetNotFound(set_id)
        return row

    def of_user(self, user_id: int) -> list[EvalSetRow]:
        return self.store.list_eval_sets(user_id)

    def folder(self, row: EvalSetRow) -> Path:
        """Where the set's files are."""
        if row.source.startswith("starter-"):
            return self.files.starter_folder(row.source.removeprefix("starter-"))
        return self.files.folder(row.user_id, row.id)

    def _check_room(self, user_id: int) -> None:
        if len(self.store.list_eval_sets(user_id)) >= MAX_SETS:
            raise LimitReached(
                429,
                f"You have {MAX_SETS} evaluation sets, the most you may keep: delete one "
                "you no longer need, then try again.",
                "too_many_eval_sets",
            )

    async def add_starter(self, user: User) -> EvalSetRow:
        """The starter set, for `user`: its files are written once for every user."""
        self._check_room(user.id)
        questions = await self._starter()
        return self.store.add_eval_set(
            user.id,
            new_set_id(),
            STARTER_SET_NAME,
            f"starter-{STARTER_VERSION}",
            [question_to_dict(q) for q in questions],
        )

    async def _starter(self) -> list[EvalQuestion]:
        folder = self.files.starter_folder(STARTER_VERSION)
        async with self._starter_lock:  # one writer; the others wait for its files
            return await run_in_threadpool(_write_once, folder)

    async def import_dabench(
        self, user: User, name: str, questions: bytes, labels: bytes, tables: list[Upload]
    ) -> EvalSetRow:
        """A set in InfiAgent-DABench's format; `InvalidEvalSet` says what is wrong with it,
        `LimitReached` when its files would pass the user's disk quota."""
        self._check_room(user.id)
        if not tables or len(tables) > MAX_TABLES:
            raise InvalidEvalSet(f"Send between 1 and {MAX_TABLES} table files.")
        names = set()
        for table in tables:
            try:
                names.add(safe_filename(table.name))
            except UnsafePath:
                raise InvalidEvalSet(f"{table.name[:100]!r} is not a plain file name.") from None
        read = read_dabench(questions, labels, names)
        needed = {f for q in read for f in q.files}
        kept = [t for t in tables if t.name in needed]
        left, quota_mb = await run_in_threadpool(self.limits.disk_left, user)
        if sum(t.size for t in kept) > left:
            raise LimitReached(
                507,
                f"The set's files would pass your disk quota of {quota_mb} MB "
                "(USER_MAX_DISK_MB): delete files, sessions or sets you no longer need.",
                "disk_quota_exceeded",
            )
        set_id = new_set_id()
        folder = self.files.folder(user.id, set_id)
        try:
            for table in kept:
                size = await run_in_threadpool(
                    self.files.write, folder, table.name, table.source, self.max_file_bytes
                )
                self.limits.disk.add(user.id, size)
            return self.store.add_eval_set(
                user.id, set_id, name, "dabench", [question_to_dict(q) for q in read]
            )
        except FileTooLarge:
            await run_in_threadpool(self.files.remove, user.id, set_id)
            raise InvalidEvalSet(
                f"A table is larger than {self.max_file_bytes / MEGABYTE:g} MB "
                "(MAX_UPLOAD_SIZE_MB)."
            ) from None
        except BaseException:
            await run_in_threadpool(self.files.remove, user.id, set_id)
            raise

    async def delete(self, user_id: int, set_id: str) -> None:
        """The set's row, its runs' rows and its files (its runs' conversations are the
        caller's to delete first)."""
        self.get(user_id, set_id)
        self.store.delete_eval_set(user_id, set_id)
        await run_in_threadpool(self.files.remove, user_id, set_id)
        self.limits.disk.changed(user_id)


def _write_once(folder: Path) -> list[EvalQuestion]:
    """The starter set's questions; its files (and `questions.json`) are written into
    `folder` the first time, in a folder beside it renamed into place once whole."""
    listed = folder / STARTER_QUESTIONS
    if not listed.exists():
        draft = folder.with_name(f".{folder.name}-{uuid.uuid4().hex}")
        draft.mkdir(mode=0o700, parents=True)
        try:
            questions = write_starter(draft)
            text = json.dumps([question_to_dict(q) for q in questions])
            (draft / STARTER_QUESTIONS).write_text(text, encoding="utf-8")
            shutil.rmtree(folder, ignore_errors=True)  # a folder left without its list
            draft.rename(folder)
        finally:
            shutil.rmtree(draft, ignore_errors=True)
    return [question_from_dict(q) for q in json.loads(listed.read_text(encoding="utf-8"))]
