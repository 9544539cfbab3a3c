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
