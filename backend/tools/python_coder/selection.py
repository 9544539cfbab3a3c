"""Which files a question needs, and the variables they are loaded into.

Files named in the request are used as given. Otherwise every upload is used
while there are at most `limit`; past that, a lexical ranking shortlists the
candidates and the LLM picks from their metadata, giving a reason for each. If
the model's pick is unusable the ranking decides alone, and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from backend.files import (
    FileMetadata,
    assign_dataframe_names,
    describe_for_prompt,
    rank_files,
)
from backend.files.catalog import WorkspaceCatalog
from backend.llm.turn import StructuredReplyError, TurnLLM
from backend.storage.s3_objects import is_s3
from backend.tools.python_coder import prompts
from backend.tools.python_coder.request import CoderRequest
from backend.tools.python_coder.result import SelectedFile

_SHORTLIST = 12


class FileChoice(BaseModel):
    name: str
    reason: str = ""


class FileChoices(BaseModel):
    files: list[FileChoice] = Field(default_factory=list)


@dataclass
class ChosenFiles:
    files: list[FileMetadata] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)  # workspace path -> variable
    selected: list[SelectedFile] = field(default_factory=list)


async def choose_files(
    request: CoderRequest, catalog: WorkspaceCatalog, llm: TurnLLM, *, limit: int
) -> ChosenFiles:
    given = request.file_paths or {}
    if request.files is not None or given:
        names = [
            *(request.files or []),
            *(name for name in given if name not in (request.files or [])),
        ]
        found = [await catalog.usable(request.session_id, name) for name in names]
        files = list({f.name: f for f in found}.values())  # "a.csv" and "uploads/a.csv" are one
        reasons = {f.name: "named in the request" for f in files}
    else:
        files = await catalog.data_files(request.session_id)
        reasons = {f.name: "one of the session's data files" for f in files}
        if len(files) > limit:
            files, reasons = await _pick(request.query, files, llm, limit)
        files = [await _usable(request, catalog, f) for f in files]
        reasons = {f.name: reasons[f.details.get("source", f.name)] for f in files}
    named = _resolved(given, files)
    mapping = assign_dataframe_names(
        [f for f in files if f.name not in named], taken=set(named.values())
    )
    mapping.update(named)
    selected = [
        SelectedFile(name=f.name, reason=reasons[f.name], variable=mapping.get(f.name))
        for f in files
    ]
    return ChosenFiles(files=files, mapping=mapping, selected=selected)


async def _usable(
    request: CoderRequest, catalog: WorkspaceCatalog, metadata: FileMetadata
) -> FileMetadata:
    """A chosen S3 object is copied into the workspace; an upload is used as it is."""
    if not is_s3(metadata.name):
        return metadata
    return await catalog.usable(request.session_id, metadata.name)


def _resolved(given: dict[str, str], files: list[FileMetadata]) -> dict[str, str]:
    """The request's path -> variable mapping, keyed by the resolved workspace paths."""
    resolved = {}
    for name, variable in given.items():
        for metadata in files:
            if name in (metadata.name, metadata.details.get("source")) or (
                metadata.name == f"uploads/{name}"
            ):
                resolved[metadata.name] = variable
    return resolved


async def _pick(
    query: str, files: list[FileMetadata], llm: TurnLLM, limit: int
) -> tuple[list[FileMetadata], dict[str, str]]:
    ranked = rank_files(query, files)
    shortlist = [metadata for _, metadata in ranked[: max(_SHORTLIST, limit)]]
    by_name = {f.name: f for f in shortlist}
    by_name.update({f.name.rsplit("/", 1)[-1]: f for f in shortlist})
    prompt = prompts.select_files(query, describe_for_prompt(shortlist, {}), limit)
    try:
        choices = await llm.json("select_files", prompts.SYSTEM, prompt, FileChoices)
    except StructuredReplyError:
        choices = FileChoices()
    picked: dict[str, str] = {}
    for choice in choices.files:
        metadata = by_name.get(choice.name.strip())
        if metadata is not None and metadata.name not in picked and len(picked) < limit:
            picked[metadata.name] = choice.reason.strip() or "chosen by the model"
    if picked:
        return [f for f in shortlist if f.name in picked], picked
    top = [(score, metadata) for score, metadata in ranked[:limit]]
    reasons = {
        metadata.name: f"lexical match with the question (score {score:.2f}); "
        "the model's choice was unusable"
        for score, metadata in top
    }
    return [metadata for _, metadata in top], reasons
