"""The OpenAI parameters a request may not use here: one the server cannot honour, or one
that only plain chat answers (`/v1/chat/completions`, `/v1/responses`, `/v1/containers`)."""

from __future__ import annotations

from backend.api.errors import ApiError


def check_parameters(unsupported: str | None, agent_type: str, **for_chat: object) -> None:
    """400s naming a parameter: one the server cannot honour, or one (of `for_chat`, given)
    that only plain chat answers while the request asks for an agent."""
    if unsupported is not None:
        raise ApiError(
            400,
            f"Unsupported parameter: '{unsupported}' is not supported by this server.",
            code="unsupported_parameter",
            param=unsupported,
        )
    for param, given in for_chat.items():
        if given is not None and agent_type not in ("auto", "chat"):
            raise ApiError(
                400,
                f"{param} is answered by plain chat: use agent_type 'chat' or 'auto'.",
                code="unsupported_parameter",
                param=param,
            )
