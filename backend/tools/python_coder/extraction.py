"""Pull Python code out of what a model wrote.

Small models wrap code in prose, use several fences (sometimes unclosed or
labelled `py`), repeat the question, or send bare code. `extract_code` keeps
the Python blocks that parse, joined in order, and otherwise cuts the code out
of the prose around it.
"""

from __future__ import annotations

import ast
import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "python3", "py", "ipython", "pycon"}
_PROMPT_PREFIX = re.compile(r"^(>>>|\.\.\.) ?", re.MULTILINE)
_CODE_START = re.compile(
    r"^(import |from \S+ import |def |class |for |while |if |with |try:|print\(|"
    r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?(\.[A-Za-z_]\w*)*\s*(=|\+=|-=|\())"
)
_MAX_TRIES = 40


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _clean(block: str) -> str:
    block = block.strip("\n")
    if block.lstrip().startswith(">>>"):
        block = _PROMPT_PREFIX.sub("", block)
    return block.rstrip() + "\n" if block.strip() else ""


def _fenced_blocks(reply: str) -> list[str]:
    blocks = []
    for tag, body in _FENCE.findall(reply):
        if tag.lower() in _PYTHON_TAGS and (code := _clean(body)):
            blocks.append(code)
    return blocks


def _code_slice(reply: str) -> str:
    """From the first line that starts like code to the last one that parses with it."""
    lines = reply.splitlines()
    starts = [i for i, line in enumerate(lines) if _CODE_START.match(line)]
    if not starts:
        return ""
    first = starts[0]
    ends = [i + 1 for i in starts if i >= first] + [len(lines)]
    for end in sorted(set(ends), reverse=True)[:_MAX_TRIES]:
        # A trailing block (a for loop's body) ends at the last indented line after `end`.
        while end < len(lines) and lines[end][:1].isspace():
            end += 1
        candidate = "\n".join(lines[first:end]).strip()
        if _looks_like_code(candidate):
            return candidate + "\n"
    return ""


def _looks_like_code(text: str) -> bool:
    """Prose like "The answer is 5" parses as nothing useful; code has calls or assignments."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, (ast.Assign, ast.AugAssign, ast.Call, ast.Import, ast.ImportFrom))
        for node in ast.walk(tree)
    )


def extract_code(reply: str) -> str:
    """The code in `reply`, or "" if there is none."""
    blocks = _fenced_blocks(reply)
    if blocks:
        joined = "\n".join(blocks)
        if _parses(joined):
            return joined
        parsing = [block for block in blocks if _parses(block)]
        if parsing:
            return "\n".join(parsing)
        return max(blocks, key=len)  # broken code still goes to the syntax check and fixer
    text = _PROMPT_PREFIX.sub("", reply) if ">>>" in reply else reply
    if _looks_like_code(text.strip()):
        return _clean(text)
    return _code_slice(text)
