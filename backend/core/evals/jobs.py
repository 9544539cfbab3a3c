"""Evaluation runs: every question of a set asked through the real agents, in the background.

A run asks its questions one after another, each in a fresh session of the user's
(`eval-<run>-<question>`) that holds only the question's files, through
`ChatService.open_turn` like any turn: so it counts in the user's limits (USER_MAX_RUNS,
daily tokens and sandbox time, disk) and each question is a conversation the user can
open. A user has one run going at a time; at most `max_running` runs go at once on the
server, the others wait `queued`. Each result is stored as it comes, so a stop loses at
most the question being asked; a run the stop cut off is `interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from starlette.concurrency import run_in_threadpool

from backend.core.chat_service import ChatService
from backend.core.evals.questions import EvalQuestion
from backend.core.evals.scoring import score
from backend.core.evals.sets import EvalSetNotFound, EvalSets, questions_of
from backend.core.events import Final
from backend.core.limits import LimitReached
from backend.core.router import AgentType
from backend.core.turn import Turn, TurnRequest
from backend.llm import LLMError
from backend.observability.metrics import EVAL_QUESTIONS
from backend.storage import Store, User
from backend.storage.evals import EvalResultRow, EvalRunRow, EvalSetRow
from backend.storage.sessions import session_key
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import FileTooLarge, Workspaces

logger = logging.getLogger(__name__)

RUN_ID = re.compile(r"^er_[0-9a-f]{32}$")
_SLOT_WAIT = 1.0  # seconds between tries for a place among the user's runs
_CANCEL_WAIT = 15.0
_STOPS_RUN = ("daily_token_limit", "daily_sandbox_limit", "disk_quota_exceeded")
_MAX_ANSWER = 20_000  # characters of an answer kept in a result


class EvalRunNotFound(LookupError):
    pass


class EvalRunBusy(Exception):
    """The user already has a run going."""


class _RunStopped(Exception):
    """A limit of the user's stops the whole run (tokens, sandbox time, disk)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Job:
    task: asyncio.Task[None]
    user_id: int
    current: str | None = None  # the question being asked


def new_run_id() -> str:
    return f"er_{uuid.uuid4().hex}"


def question_session(run_id: str, question_id: str) -> str:
    """The session id a run's question is asked in."""
    return f"eval-{run_id.removeprefix('er_')[:12]}-{question_id}"


class EvalJobs:
    def __init__(
        self,
        store: Store,
        chat: ChatService,
        sets: EvalSets,
        workspaces: Workspaces,
        shared: SharedWorkspaces,
        server_id: str,
        *,
        max_running: int,
        max_file_bytes: int,
    ) -> None:
        self.store = store
        self.chat = chat
        self.sets = sets
        self.workspaces = workspaces
        self.shared = shared
        self.server_id = server_id
        self.max_file_bytes = max_file_bytes
        self._running = asyncio.Semaphore(max_running)
        self._jobs: dict[str, _Job] = {}
        self._starting: set[int] = set()  # users whose run is being started
        self._closing = False

    def get(self, user_id: int, run_id: str) -> EvalRunRow:
        row = self.store.get_eval_run(user_id, run_id) if RUN_ID.fullmatch(run_id) else None
        if row is None:
            raise EvalRunNotFound(run_id)
        return row

    def of_user(self, user_id: int) -> list[EvalRunRow]:
        return self.store.list_eval_runs(user_id)

    def results(self, user_id: int, run_id: str) -> list[EvalResultRow]:
        return self.store.eval_results(user_id, run_id)

    def delete(self, user_id: int, run_id: str) -> None:
        self.store.delete_eval_run(user_id, run_id)

    def current(self, run_id: str) -> str | None:
        job = self._jobs.get(run_id)
        return job.current if job is not None else None

    async def start(
        self, user: User, eval_set: EvalSetRow, model: str, agent_type: AgentType
    ) -> EvalRunRow:
        """The run, stored `queued` and started; `EvalRunBusy` if the user has one going,
        `LLMError` for a model the backend does not have."""
        if user.id in self._starting or any(j.user_id == user.id for j in self._jobs.values()):
            raise EvalRunBusy(user.id)
        self._starting.add(user.id)  # held across the model check: one start at a time
        try:
            model = await self.chat.rights.model_for(user, model)
            run = self.store.add_eval_run(
                user.id, new_run_id(), eval_set, model, agent_type, self.server_id
            )
            task = asyncio.create_task(self._drive(user, run, eval_set), name=f"eval-{run.id}")
            self._jobs[run.id] = _Job(task, user.id)
        finally:
            self._starting.discard(user.id)
        return run

    async def cancel(self, user_id: int, run_id: str) -> EvalRunRow:
        """Stop the run (its question's code is killed); its results so far stay."""
        self.get(user_id, run_id)
        job = self._jobs.get(run_id)
        if job is not None:
            job.task.cancel()
            await asyncio.wait({job.task}, timeout=_CANCEL_WAIT)
        return self.get(user_id, run_id)

    async def cancel_user(self, user_id: int) -> None:
        """Stop every run of the user's (who is being deleted)."""
        tasks = [job.task for job in self._jobs.values() if job.user_id == user_id]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CANCEL_WAIT)

    def conversations(self, user_id: int, run_id: str) -> list[str]:
        """The conversations of the run's questions."""
        return [
            str(result.details["conversation_id"])
            for result in self.store.eval_results(user_id, run_id)
            if result.details.get("conversation_id")
        ]

    async def close(self) -> None:
        """The server stops: its runs end `interrupted`."""
        self._closing = True
        tasks = [job.task for job in self._jobs.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CANCEL_WAIT)

    async def _drive(self, user: User, run: EvalRunRow, eval_set: EvalSetRow) -> None:
        status, error = "completed", ""
        try:
            async with self._running:
                self.store.set_eval_run_status(run.id, "running")
                folder = self.sets.folder(eval_set)
                for position, question in enumerate(questions_of(eval_set)):
                    self._jobs[run.id].current = question.id
                    await self._ask(self._account(user.id), run, position, question, folder)
        except asyncio.CancelledError:
            status = "interrupted" if self._closing else "cancelled"
            error = "The server stopped during the run." if self._closing else ""
        except _RunStopped as exc:
            status, error = "failed", exc.message
        except Exception:
            logger.exception("evaluation run %s failed", run.id)
            status, error = "failed", "The run failed; see the server log."
        finally:
            self._jobs.pop(run.id, None)
            with contextlib.suppress(Exception):  # a deleted run has no row to finish
                self.store.set_eval_run_status(run.id, status, error, finished=True)

    def _account(self, user_id: int) -> User:
        """The user as they are now (an admin may have changed their limits, or disabled
        them, since the run began)."""
        user = self.store.get_user_by_id(user_id)
        if user is None or user.disabled:
            raise _RunStopped("The account was disabled during the run.")
        return user

    async def _ask(
        self, user: User, run: EvalRunRow, position: int, question: EvalQuestion, folder: Path
    ) -> None:
        """Ask one question and store its result, however it ends."""
        session_id = question_session(run.id, question.id)
        details: dict[str, Any] = {
            "question": question.question,
            "kind": question.kind,
            "expected": {e.name: e.value for e in question.expected},
            "session_id": session_id,
            "conversation_id": None,
            "answer": "",
            "extracted": {},
            "values": {},
            "code": [],
            "llm_calls": 0,
            "tokens": 0,
            "seconds": 0.0,
            "error": None,
        }
        started = time.perf_counter()
        turn: Turn | None = None
        correct = stopped = False
        try:
            await self._prepare(user, session_id, question, folder, details)
            turn = await self._open(user, run, session_id, question)
            final = await _final(turn)
            scored = score(question, final.text)
            correct = scored.correct
            details.update(
                answer=final.text[:_MAX_ANSWER],
                extracted=scored.extracted,
                values=scored.values,
                code=final.summary.code,
            )
        except LimitReached as exc:
            if exc.code in _STOPS_RUN:
                details["error"] = exc.message
                raise _RunStopped(exc.message) from None
            details["error"] = exc.message
        except LLMError as exc:
            details["error"] = exc.message
            if exc.code in _STOPS_RUN:
                raise _RunStopped(exc.message) from None
        except FileNotFoundError:
            details["error"] = "A file of the question is missing from its set."
        except FileTooLarge:
            details["error"] = "A file of the question is over MAX_UPLOAD_SIZE_MB."
        except asyncio.CancelledError:
            details["error"] = "The run was stopped during this question."
            stopped = True
            raise
        finally:
            if turn is not None:
                counts = turn.counts()
                details["llm_calls"] = counts.llm_calls
                details["tokens"] = counts.prompt_tokens + counts.completion_tokens
            details["seconds"] = round(time.perf_counter() - started, 3)
            if not stopped:
                result = "error" if details["error"] else ("right" if correct else "wrong")
                EVAL_QUESTIONS.labels(model=run.model, result=result).inc()
            with contextlib.suppress(Exception):  # a run deleted meanwhile has no row
                self.store.add_eval_result(
                    run.id, question.id, position, correct, details, stopped=stopped
                )

    async def _prepare(
        self,
        user: User,
        session_id: str,
        question: EvalQuestion,
        folder: Path,
        details: dict[str, Any],
    ) -> None:
        """The question's fresh session, holding its files (counted in the user's quota
        before they are copied); its conversation goes in `details` as soon as it exists,
        so deleting the run deletes it, however the question ends."""
        files = self.sets.files
        sizes = sum(files.size(folder, name) for name in question.files)
        limits = self.sets.limits
        left, quota_mb = await run_in_threadpool(limits.disk_left, user)
        if sizes > left:
            raise LimitReached(
                507,
                f"The question's files would pass your disk quota of {quota_mb} MB "
                "(USER_MAX_DISK_MB): delete files, sessions or runs you no longer need.",
                "disk_quota_exceeded",
            )
        key = session_key(user.id, session_id)
        conversation = self.store.conversation_for_session(user.id, key, "")
        details["conversation_id"] = conversation.id
        await run_in_threadpool(self.workspaces.ensure, key)
        for name in question.files:
            with files.open(folder, name) as source:
                size = await run_in_threadpool(
                    self.workspaces.write_upload, key, name, source, self.max_file_bytes
                )
            limits.disk.add(user.id, size)
        await self.shared.push(key)

    async def _open(
        self, user: User, run: EvalRunRow, session_id: str, question: EvalQuestion
    ) -> Turn:
        """The question's turn; waits while the user has USER_MAX_RUNS turns going."""
        request = TurnRequest(
            messages=[HumanMessage(question.prompt)],
            model=run.model,
            session_id=session_id,
            agent_type=run.agent_type,  # type: ignore[arg-type]  # checked when the run began
        )
        while True:
            try:
                return await self.chat.open_turn(user, request)
            except LimitReached as exc:
                if exc.code != "too_many_runs":
                    raise
            await asyncio.sleep(_SLOT_WAIT)


async def _final(turn: Turn) -> Final:
    """Run the turn to its end; its `Final` event (an error ends it as `LLMError`)."""
    final: Final | None = None
    async with contextlib.aclosing(turn.events) as events:
        async for event in events:
            if isinstance(event, Final):
                final = event
    if final is None:
        raise LLMError("The turn ended without an answer.", code="no_answer")
    return final


__all__ = [
    "EvalJobs",
    "EvalRunBusy",
    "EvalRunNotFound",
    "EvalSetNotFound",
    "question_session",
]
