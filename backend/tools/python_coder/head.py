"""The head of an agent turn's prompts: what every one of them starts with, byte for byte.

A local model's server (llama.cpp, Ollama) reuses its cache only for a prompt's
shared prefix, so the stable parts of a turn come first, once, in the same
bytes: the system prompt with the tools, the coding rules and the session's file
metadata, then the conversation so far. Each stage adds only its own
instruction after it. A later turn of the session extends the same prefix: its
conversation has two more messages at the end. The conversation is cut in blocks
of ten messages, so the start of the prefix moves only every fifth turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from backend.files import describe_for_prompt
from backend.files.catalog import WorkspaceCatalog
from backend.llm.turn import TurnLLM
from backend.storage.sessions import SessionKey
from backend.tools.python_coder import prompts
from backend.tools.python_coder.request import CoderRequest
from backend.tools.python_coder.selection import choose_files

_HISTORY_BLOCK = 10  # messages
_MESSAGE_CHARS = 1_000


@dataclass(frozen=True)
class TurnHead:
    messages: list[BaseMessage]
    files: str  # the file metadata it carries, which python_coder then leaves out


async def turn_head(
    catalog: WorkspaceCatalog,
    llm: TurnLLM,
    session_id: SessionKey,
    tools: Sequence[tuple[str, str]],
    history: Sequence[tuple[str, str]],
    *,
    file_limit: int,
    sources: str = "",
) -> TurnHead:
    """The head for a turn in `session_id`, with `tools` (name, description) and `history`;
    `sources`: the session's attached data sources, listed."""
    files = await catalog.data_files(session_id)
    if len(files) > file_limit:  # python_coder picks a task's files, and describes those
        described = "\n".join(f"- {f.name}" for f in files)
    else:  # the files and variables python_coder will use, described as it describes them
        chosen = await choose_files(
            CoderRequest(session_id=session_id, query=""), catalog, llm, limit=file_limit
        )
        described = describe_for_prompt(chosen.files, chosen.mapping)
    if sources:
        described = f"{described}\n\n{sources}" if files else sources
    listing = "\n".join(f"- {name}: {description}" for name, description in tools)
    system = prompts.head_system(listing, described, charts=llm.profile.free_form_code)
    messages: list[BaseMessage] = [SystemMessage(system)]
    for role, content in _kept(history):
        text = content if len(content) <= _MESSAGE_CHARS else content[:_MESSAGE_CHARS] + "…"
        messages.append(HumanMessage(text) if role == "user" else AIMessage(text))
    return TurnHead(messages=messages, files=described)


def _kept(history: Sequence[tuple[str, str]]) -> Sequence[tuple[str, str]]:
    """The last 10 to 19 messages, starting at a multiple of 10, so the start rarely moves."""
    start = max(0, (len(history) // _HISTORY_BLOCK - 1) * _HISTORY_BLOCK)
    return history[start:]
