"""What a backend's model can be trusted to do, decided once when the backend is created.

The agents and the coder read these named capabilities instead of asking which
backend they run on. Each capability that is False has a fixed course that does
not need the model for that job (see each field).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelProfile:
    # False: python_coder has it fill an analysis spec and renders the code from a template.
    free_form_code: bool
    # False: plan_execute follows the question's own steps, never replans, and answers with
    # each step's grounded answer (its plans name steps like "write_a_plan").
    plans: bool
    # False: no LLM review of the code (it approves whatever it is shown); execution errors
    # drive the fixes instead.
    reviews_code: bool
    # False: the ReAct agent hands the question straight to python_coder (the model answers
    # "Action:" prompts with prose, which would end the turn with an invented answer).
    chooses_tools: bool
    # Whether the model reads tool calls and results in its history (else they reach it as text).
    native_tools: bool = False
    # True: a turn's prompts share one head (tools, rules, file metadata, the conversation) and
    # python_coder's stages continue one conversation, which the model's server caches. False:
    # each stage gets one short prompt of its own (a context of a few thousand tokens).
    long_context: bool = True
    # A cap on every reply of a turn, past which the model only rambles; None: the stage's own.
    max_tokens: int | None = None
    # A tighter cap on the written answer (past a sentence or two it repeats the prompt).
    answer_tokens: int | None = None
    # The most MCP tools (backend/core/mcp_registry.py) the agents' prompts list; None: all
    # that are allowed. A small model's prompt must stay short.
    mcp_tools: int | None = None
    # False: the router never asks the model which agent answers (its choice is noise);
    # with files in the session, every message but small talk runs code.
    routes_itself: bool = True
    # True: python_coder's answer (and a small plan's final answer) is what the run printed,
    # in a short template, with no model call (the model's prose invents code and output).
    templated_answer: bool = False


# A model that does all of it, calling the client's tools through a prompt.
CAPABLE = ModelProfile(free_form_code=True, plans=True, reviews_code=True, chooses_tools=True)
# A model behind an API with tool calling of its own (Ollama, OpenAI-compatible servers).
CAPABLE_NATIVE_TOOLS = replace(CAPABLE, native_tools=True)
# The embedded demo model (a few hundred million parameters at most).
SMALL = ModelProfile(
    free_form_code=False,
    plans=False,
    reviews_code=False,
    chooses_tools=False,
    long_context=False,
    max_tokens=400,
    answer_tokens=120,
    mcp_tools=2,
    routes_itself=False,
    templated_answer=True,
)
