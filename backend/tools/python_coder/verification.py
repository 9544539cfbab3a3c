"""Check generated code before it runs: static checks, then an LLM review.

The static checks (syntax, the sandbox's AST pre-filter) cost nothing and give
the model exact messages; they always run. The review asks one question only:
does this code answer the question? It continues the conversation that wrote
the code (`Conversation`), so it costs a short question and a short verdict. It
is skipped where it cannot help, and the result says why, so nobody mistakes a
skipped review for an approval. The model's own `Check:` line after its code
counts too: a "no" there sends the code back with the model's reason, as a
failed review would.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import partial

from backend.llm.turn import StructuredReplyError, TurnLLM
from backend.tools.python_coder import prompts
from backend.tools.python_coder.conversation import Conversation, check_says_no, self_check
from backend.tools.python_coder.extraction import extract_code
from backend.tools.python_coder.prompts import CodingContext
from backend.tools.python_coder.result import Modification, Review, VerificationRound
from backend.tools.sandbox.ast_check import check_code

_TRIVIAL_STATEMENTS = 3


def static_problems(code: str, prefilter: bool = True) -> list[str]:
    """Syntax errors and pre-filter findings, as messages the model can act on."""
    if not code.strip():
        return ["The reply contained no Python code; reply with code in a ```python block."]
    try:
        compile(code, "<cell>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}"]
    except ValueError as exc:  # null bytes
        return [f"syntax error: {exc}"]
    return check_code(code) if prefilter else []


def review_skip_reason(llm: TurnLLM, code: str, max_iterations: int) -> str | None:
    """Why an LLM review would not help here, or None if it should run."""
    if max_iterations <= 0:
        return "PYTHON_CODE_MAX_ITERATIONS is 0"
    if not llm.profile.reviews_code:
        return (
            f"the {llm.backend.name} model is too small to review code (it approves anything); "
            "execution errors drive the fixes instead"
        )
    try:
        statements = len(ast.parse(code).body)
    except SyntaxError:
        return None
    if statements <= _TRIVIAL_STATEMENTS:
        return f"the code is trivial ({statements} statements)"
    return None


@dataclass
class Verified:
    code: str
    rounds: list[VerificationRound] = field(default_factory=list)
    modifications: list[Modification] = field(default_factory=list)
    review_skipped: str | None = None


async def verify(
    code: str,
    context: CodingContext,
    conversation: Conversation,
    *,
    max_iterations: int,
    prefilter: bool = True,
    check: str | None = None,
) -> Verified:
    """Up to `max_iterations` check-and-modify rounds; returns the code to run.

    Each round checks the code and, if it fails, has it modified, so the last
    round's findings are acted on too; the final version's own check is the one
    execution makes before running it. `check`: the model's own `Check:` line.
    """
    llm = conversation.llm
    verified = Verified(code)
    for iteration in range(1, max(max_iterations, 1) + 1):
        problems = static_problems(verified.code, prefilter)
        review: Review | None = None
        if not problems and check_says_no(check) and llm.profile.reviews_code and max_iterations:
            review = Review(answers_question=False, problems=[f"Your own check: {check}"])
        elif not problems:
            skip = review_skip_reason(llm, verified.code, max_iterations)
            if skip is not None:
                verified.review_skipped = skip
                verified.rounds.append(VerificationRound(iteration=iteration, approved=True))
                return verified
            review = await _review(context, verified.code, conversation)
            if review is None or review.answers_question:
                verified.rounds.append(
                    VerificationRound(
                        iteration=iteration,
                        review=review,
                        approved=None if review is None else True,
                    )
                )
                return verified
        verified.rounds.append(
            VerificationRound(
                iteration=iteration, static_problems=problems, review=review, approved=False
            )
        )
        if max_iterations <= 0:
            break  # no modifications allowed: execution reports the problems
        reasons = problems or (review.problems if review else []) or ["It does not answer INPUT."]
        reply = await conversation.text(
            "modify",
            prompts.modify_followup(context.query, reasons),
            partial(prompts.modify, context, verified.code, reasons),
        )
        verified.code = extract_code(reply) or verified.code
        check = self_check(reply)
        verified.modifications.append(
            Modification(
                stage="static" if problems else "review",
                iteration=iteration,
                reason="; ".join(reasons),
                code=verified.code,
            )
        )
    if not any(r.review for r in verified.rounds) and verified.review_skipped is None:
        verified.review_skipped = "every round was spent on static problems"
    return verified


async def _review(context: CodingContext, code: str, conversation: Conversation) -> Review | None:
    """The verdict, or None when the reply cannot be read (no verdict is not approval)."""
    try:
        return await conversation.json(
            "review",
            prompts.review_followup(context.query),
            lambda: prompts.review(context, code),
            Review,
        )
    except StructuredReplyError:
        return None
