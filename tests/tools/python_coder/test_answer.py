"""The answer built from the run's output, and a small model's echo cut from a draft."""

from __future__ import annotations

from backend.tools.python_coder.answer import output_answer


def test_the_output_answer_lists_plots_and_other_files() -> None:
    answer = output_answer("total: 60\n", ["outputs/plot_a_1.png", "outputs/report.csv"])
    assert "```text\ntotal: 60\n```" in answer
    assert "![plot_a_1.png](outputs/plot_a_1.png)" in answer
    assert "- `outputs/report.csv`" in answer and "**Next steps**" in answer


def test_a_small_model_echoing_the_prompt_keeps_only_its_answer() -> None:
    from backend.tools.python_coder.answer import _without_echo

    draft = "The mean price is 19.5.\n\n## INPUT\nWhat is the mean?\n**Output**\n19.5"
    assert _without_echo(draft) == "The mean price is 19.5."
    assert _without_echo("[stage: answer]\n## INPUT\nx") == ""


def test_a_small_model_repeating_itself_is_cut_at_the_first_repeat() -> None:
    from backend.tools.python_coder.answer import _without_echo

    draft = "The highest temperature is 37.8.\n**Output**:\nThe output is:\n**Output**:\nx"
    assert _without_echo(draft) == "The highest temperature is 37.8."
    looping = "- Mean salary: 58488.8\n- It is high.\n- Mean salary: 58488.8\n- It is high."
    assert _without_echo(looping) == "- Mean salary: 58488.8\n- It is high."


async def _streamed(reply: str, *, partial: bool, files: list[str] | None = None) -> tuple[
    str | None, list[str], list[str]
]:  # fmt: skip
    """The answer `stream_answer` writes from a scripted `reply`, the pieces shown, the prompts."""
    from backend.tools.python_coder.answer import stream_answer
    from backend.tools.python_coder.conversation import Conversation
    from tests.support.scripted_llm import scripted_llm

    llm, model = scripted_llm([reply])
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    output = "totals: {'north': 35, 'south': 30}\n"
    answer = await stream_answer(
        Conversation(llm), "Q?", "Q?", output, files or [], show, partial=partial
    )
    return answer, shown, model.prompts


async def test_a_streamed_answer_is_shown_piece_by_piece_and_is_the_whole_answer() -> None:
    reply = "- North leads with 35.\n- South follows with 30.\n\nWant a chart?"
    answer, shown, prompts = await _streamed(reply, partial=True)
    assert answer == reply and "".join(shown) == reply and len(shown) >= 3
    assert "PARTIAL" in prompts[0]  # the model was offered the way out


async def test_partial_shows_nothing_and_tells_the_agent_to_go_on() -> None:
    answer, shown, _ = await _streamed("PARTIAL", partial=True)
    assert answer is None and shown == []
    answer, shown, prompts = await _streamed("PARTIAL", partial=False)
    assert answer is not None and "PARTIAL" not in prompts[0]  # not offered: taken as text


async def test_an_invented_number_is_withheld_and_the_output_closes_the_answer() -> None:
    answer, shown, _ = await _streamed("North leads with 35.\nWest has 12.\n", partial=False)
    assert answer is not None and answer.startswith("North leads with 35.\n")
    assert "12" not in answer and "```text\ntotals: {'north': 35, 'south': 30}\n```" in answer
    assert "".join(shown).strip() == answer


async def test_the_turns_answer_links_no_workspace_plot() -> None:
    """Its plots reach the client as plot events, with URLs; a workspace path would not load."""
    answer, _, _ = await _streamed("North leads with 35.", partial=False, files=["outputs/a.png"])
    assert answer == "North leads with 35."
