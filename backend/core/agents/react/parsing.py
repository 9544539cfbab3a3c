"""Read a model's ReAct reply: a thought, then an action with its input, or a final answer.

Small models misspell tool names, drop the colon, wrap the input in quotes or a
code fence, or write a final answer without the label. Tool names are matched
fuzzily (with the seeds' aliases: "coder", "generate", "generate_code" mean
python_coder), and anything that is neither an action nor a final answer is
taken as the answer, not an error.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_FIELD = re.compile(
    r"^\s*(thought|action input|action_input|action|final answer|final_answer)\s*:?\s*",
    re.IGNORECASE | re.MULTILINE,
)
ALIASES = {
    "coder": "python_coder",
    "code": "python_coder",
    "generate": "python_coder",
    "generate_code": "python_coder",
    "python": "python_coder",
    "pythoncoder": "python_coder",
    "rag": "rag_retrieval",
    "retrieve": "rag_retrieval",
    "search_documents": "rag_retrieval",
    "search": "web_search",
    "websearch": "web_search",
    "files": "list_files",
    "listfiles": "list_files",
}


@dataclass(frozen=True)
class ParsedReply:
    thought: str
    tool: str | None = None  # canonical name, when the reply is an action
    tool_input: str = ""
    answer: str | None = None  # when the reply is a final answer
    unknown_tool: str | None = None  # an action naming no tool we have


def _fields(reply: str) -> dict[str, str]:
    found: dict[str, str] = {}
    matches = list(_FIELD.finditer(reply))
    for index, match in enumerate(matches):
        key = match.group(1).lower().replace("_", " ")
        end = matches[index + 1].start() if index + 1 < len(matches) else len(reply)
        found.setdefault(key, reply[match.end() : end].strip())
    return found


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "", name.lower().replace(" ", "_").replace("-", "_")).strip("_")


def match_tool(name: str, tools: list[str]) -> str | None:
    """The tool `name` means, allowing for case, punctuation, aliases and typos."""
    by_plain = {_plain(tool): tool for tool in tools}
    plain = _plain(name)
    if plain in by_plain:
        return by_plain[plain]
    alias = ALIASES.get(plain) or ALIASES.get(plain.replace("_", ""))
    if alias in tools:
        return alias
    close = difflib.get_close_matches(plain, list(by_plain), n=1, cutoff=0.7)
    return by_plain[close[0]] if close else None


def _clean_input(text: str) -> str:
    text = text.strip()
    fence = re.match(r"^```[a-z]*\n(.*?)\n?```$", text, re.DOTALL)
    if fence:
        text = fence.group(1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip()


def parse_reply(reply: str, tools: list[str]) -> ParsedReply:
    fields = _fields(reply)
    thought = fields.get("thought", "")
    if "final answer" in fields and "action" not in fields:
        return ParsedReply(thought=thought, answer=fields["final answer"] or reply.strip())
    if "action" in fields:
        raw = fields["action"].splitlines()[0] if fields["action"] else ""
        tool = match_tool(raw, tools)
        tool_input = _clean_input(fields.get("action input", ""))
        if tool is None:
            return ParsedReply(thought=thought, unknown_tool=raw.strip() or "(none)")
        return ParsedReply(thought=thought, tool=tool, tool_input=tool_input)
    answer = fields.get("final answer") or reply.strip()
    return ParsedReply(thought=thought, answer=answer)
