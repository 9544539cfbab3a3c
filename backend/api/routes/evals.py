"""`/api/evals`: evaluation sets (the starter set, or DABench's format imported), runs of a
set on a model in the background, their per-question results, and two runs compared.

Another user's set or run, a deleted one and a made-up id are all "not found".
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile, status

from backend.api.deps import CurrentUser, EvalJobsDep, EvalSetsDep, PurgeDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.evals.scoring import wilson
from backend.core.evals.sets import Upload, questions_of
from backend.core.purge import SessionPurge
from backend.models.evals import (
    EvalComparison,
    EvalExpectedPublic,
    EvalKindScore,
    EvalPair,
    EvalQuestionPublic,
    EvalResultPublic,
    EvalRunCreate,
    EvalRunDetail,
    EvalRunPublic,
    EvalScore,
    EvalSetDetail,
    EvalSetPublic,
)
from backend.storage.evals import EvalResultRow, EvalRunRow, EvalSetRow

router = APIRouter(prefix="/api/evals", tags=["evaluations"], responses=CLIENT_ERRORS)

MAX_JSONL_BYTES = 16 * 1024 * 1024


def _set_public(row: EvalSetRow) -> EvalSetPublic:
    kinds: dict[str, int] = defaultdict(int)
    for question in row.questions:
        kinds[str(question.get("kind", ""))] += 1
    return EvalSetPublic(
        id=row.id,
        name=row.name,
        source="starter" if row.source.startswith("starter") else "dabench",
        question_count=len(row.questions),
        kinds=dict(kinds),
        created_at=row.created_at,
    )


def _score(right: int, answered: int) -> EvalScore:
    low, high = wilson(right, answered)
    return EvalScore(
        right=right,
        answered=answered,
        accuracy=right / answered if answered else 0.0,
        low=low,
        high=high,
    )


def _run_public(row: EvalRunRow, current: str | None) -> EvalRunPublic:
    return EvalRunPublic(
        id=row.id,
        set_id=row.set_id,
        set_name=row.set_name,
        model=row.model,
        agent_type=row.agent_type,
        status=row.status,  # type: ignore[arg-type]  # the runner writes only these
        total=row.total,
        done=row.done,
        current=current,
        error=row.error,
        created_at=row.created_at,
        finished_at=row.finished_at,
        score=_score(row.correct, row.done),
    )


def _result_public(row: EvalResultRow) -> EvalResultPublic:
    d = row.details
    return EvalResultPublic(
        question_id=row.question_id,
        kind=str(d.get("kind", "")),
        question=str(d.get("question", "")),
        correct=row.correct,
        expected=d.get("expected", {}),
        answer=str(d.get("answer", "")),
        extracted=d.get("extracted", {}),
        values=d.get("values", {}),
        code=d.get("code", []),
        llm_calls=int(d.get("llm_calls", 0)),
        tokens=int(d.get("tokens", 0)),
        seconds=float(d.get("seconds", 0.0)),
        error=d.get("error"),
        stopped=row.stopped,
        session_id=str(d.get("session_id", "")),
        conversation_id=d.get("conversation_id"),
    )


def _by_kind(results: list[EvalResultPublic]) -> list[EvalKindScore]:
    kinds: dict[str, list[EvalResultPublic]] = defaultdict(list)
    for result in results:
        if not result.stopped:  # never answered
            kinds[result.kind].append(result)
    return [
        EvalKindScore(
            kind=kind,
            right=sum(r.correct for r in group),
            answered=len(group),
            llm_calls=sum(r.llm_calls for r in group),
            tokens=sum(r.tokens for r in group),
            seconds=round(sum(r.seconds for r in group), 3),
        )
        for kind, group in kinds.items()
    ]


@router.get("/sets")
async def read_eval_sets(user: CurrentUser, sets: EvalSetsDep) -> list[EvalSetPublic]:
    """Your evaluation sets, newest first."""
    return [_set_public(row) for row in sets.of_user(user.id)]


@router.post("/sets/starter", status_code=status.HTTP_201_CREATED)
async def create_starter_set(user: CurrentUser, sets: EvalSetsDep) -> EvalSetPublic:
    """Add the project's starter set: questions of several types over data it generates."""
    return _set_public(await sets.add_starter(user))


@router.post("/sets", status_code=status.HTTP_201_CREATED)
async def import_eval_set(
    user: CurrentUser,
    sets: EvalSetsDep,
    questions: Annotated[UploadFile, File(description="DABench's questions jsonl.")],
    labels: Annotated[UploadFile, File(description="DABench's labels jsonl.")],
    tables: Annotated[list[UploadFile], File(description="The files the questions name.")],
    name: Annotated[str, Form(min_length=1, max_length=200)] = "DABench",
) -> EvalSetPublic:
    """Import a set in InfiAgent-DABench's format: questions, labels and the tables."""
    asked, labelled = await _jsonl(questions), await _jsonl(labels)
    uploads = [Upload(t.filename or "", t.file, t.size or 0) for t in tables]
    row = await sets.import_dabench(user, name.strip() or "DABench", asked, labelled, uploads)
    return _set_public(row)


async def _jsonl(part: UploadFile) -> bytes:
    data = await part.read(MAX_JSONL_BYTES + 1)
    if len(data) > MAX_JSONL_BYTES:
        raise ApiError(413, "A jsonl file is larger than 16 MB.", code="file_too_large")
    return data


@router.get("/sets/{set_id}")
async def read_eval_set(set_id: str, user: CurrentUser, sets: EvalSetsDep) -> EvalSetDetail:
    """A set, with its questions and their expected answers."""
    row = sets.get(user.id, set_id)
    questions = [
        EvalQuestionPublic(
            id=q.id,
            question=q.question,
            files=list(q.files),
            expected=[EvalExpectedPublic(**vars(e)) for e in q.expected],
            kind=q.kind,
            constraints=q.constraints,
            format=q.format,
        )
        for q in questions_of(row)
    ]
    return EvalSetDetail(**_set_public(row).model_dump(), questions=questions)


async def _forget_run(
    user_id: int, run: EvalRunRow, evals: EvalJobsDep, purge: SessionPurge
) -> None:
    """Stop the run and delete its questions' conversations (its rows are the caller's)."""
    await evals.cancel(user_id, run.id)
    for conversation_id in evals.conversations(user_id, run.id):
        await purge.session(user_id, conversation_id)


@router.delete("/sets/{set_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_eval_set(
    set_id: str, user: CurrentUser, sets: EvalSetsDep, evals: EvalJobsDep, purge: PurgeDep
) -> Response:
    """Delete a set, its runs and their conversations."""
    sets.get(user.id, set_id)  # yours, or a 404
    for run in evals.of_user(user.id):
        if run.set_id == set_id:
            await _forget_run(user.id, run, evals, purge)
    await sets.delete(user.id, set_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/runs", status_code=status.HTTP_202_ACCEPTED)
async def create_eval_run(
    body: EvalRunCreate, user: CurrentUser, sets: EvalSetsDep, evals: EvalJobsDep
) -> EvalRunPublic:
    """Ask every question of a set on a model, in the background; follow it with GET."""
    eval_set = sets.get(user.id, body.set_id)
    run = await evals.start(user, eval_set, body.model, body.agent_type)
    return _run_public(run, None)


@router.get("/runs")
async def read_eval_runs(user: CurrentUser, evals: EvalJobsDep) -> list[EvalRunPublic]:
    """Your evaluation runs, newest first, with their progress and scores."""
    return [_run_public(run, evals.current(run.id)) for run in evals.of_user(user.id)]


@router.get("/runs/{run_id}")
async def read_eval_run(run_id: str, user: CurrentUser, evals: EvalJobsDep) -> EvalRunDetail:
    """A run's progress and score, and each question's result so far."""
    run = evals.get(user.id, run_id)
    results = [_result_public(r) for r in evals.results(user.id, run.id)]
    return EvalRunDetail(
        **_run_public(run, evals.current(run.id)).model_dump(),
        results=results,
        by_kind=_by_kind(results),
    )


@router.post("/runs/{run_id}/cancel")
async def cancel_eval_run(run_id: str, user: CurrentUser, evals: EvalJobsDep) -> EvalRunPublic:
    """Stop a run; the results so far stay."""
    evals.get(user.id, run_id)  # yours, or a 404
    return _run_public(await evals.cancel(user.id, run_id), None)


@router.delete("/runs/{run_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_eval_run(
    run_id: str, user: CurrentUser, evals: EvalJobsDep, purge: PurgeDep
) -> Response:
    """Delete a run, its results and its questions' conversations."""
    run = evals.get(user.id, run_id)
    await _forget_run(user.id, run, evals, purge)
    evals.delete(user.id, run.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/runs/{run_id}/compare/{other_id}")
async def compare_eval_runs(
    run_id: str, other_id: str, user: CurrentUser, evals: EvalJobsDep
) -> EvalComparison:
    """Two of your runs side by side, question by question (in the first run's order)."""
    first, second = evals.get(user.id, run_id), evals.get(user.id, other_id)
    a = {r.question_id: _result_public(r) for r in evals.results(user.id, first.id)}
    b = {r.question_id: _result_public(r) for r in evals.results(user.id, second.id)}
    pairs = []
    for question_id in [*a, *(q for q in b if q not in a)]:
        shown = a.get(question_id) or b[question_id]
        pairs.append(
            EvalPair(
                question_id=question_id,
                kind=shown.kind,
                question=shown.question,
                first=a.get(question_id),
                second=b.get(question_id),
            )
        )
    return EvalComparison(
        first=_run_public(first, evals.current(first.id)),
        second=_run_public(second, evals.current(second.id)),
        questions=pairs,
    )
