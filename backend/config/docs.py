"""docs/configuration.md, generated from the settings' own descriptions.

Run `.venv/bin/python -m backend.config.docs > docs/configuration.md` after changing a
setting; `tests/config/test_configuration_docs.py` fails while the page is stale.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Literal, get_args, get_origin

import annotated_types
from pydantic.fields import FieldInfo

from backend.config.settings import Settings

# The page's sections, in order. A field in none of them (or a name that is no field)
# stops the generator, so a new setting cannot go undocumented.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Server",
        (
            "HOST",
            "PORT",
            "DATA_DIR",
            "DATABASE_URL",
            "MAX_REQUEST_SIZE_MB",
            "STREAM_KEEPALIVE_SECONDS",
            "LOG_LEVEL",
            "ACCESS_LOG",
            "FRONTEND_PORT",
        ),
    ),
    (
        "LLM",
        (
            "LLM_BACKEND",
            "LLM_REQUEST_TIMEOUT",
            "OLLAMA_HOST",
            "OLLAMA_MODEL",
            "OLLAMA_KEEP_ALIVE",
            "OLLAMA_NUM_CTX",
            "LLM_CONTEXT_WINDOW",
            "MODEL_PROFILES",
            "MODEL_PROBE",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "OPENAI_MODEL",
            "OPENAI_CACHE_PROMPT",
            "EMBEDDED_MODEL_PATH",
            "EMBEDDED_CONTEXT_SIZE",
            "EMBEDDED_THREADS",
            "EMBEDDED_PROMPT_CACHE_MB",
            "EMBEDDED_MAX_TOKENS",
            "SCRIPTED_REPLIES",
        ),
    ),
    ("Agents", ("AGENT_MAX_ITERATIONS", "AGENT_TURN_TIMEOUT", "AGENT_MAX_LLM_CALLS")),
    ("Web search", ("TAVILY_API_KEY", "TAVILY_BASE_URL")),
    (
        "Sign-in",
        (
            "ADMIN_USERNAME",
            "ADMIN_PASSWORD",
            "SECRET_KEY",
            "JWT_EXPIRATION_HOURS",
            "PASSWORD_HASH_ROUNDS",
            "LOGIN_FREE_ATTEMPTS",
            "LOGIN_BACKOFF_SECONDS",
            "TRUSTED_PROXIES",
            "API_DOCS",
        ),
    ),
    (
        "Single sign-on",
        (
            "PASSWORD_SIGN_IN",
            "OIDC_ISSUER",
            "OIDC_CLIENT_ID",
            "OIDC_CLIENT_SECRET",
            "OIDC_PROVIDER_NAME",
            "OIDC_SCOPES",
            "OIDC_REDIRECT_URL",
            "OIDC_USERNAME_CLAIM",
            "OIDC_GROUPS_CLAIM",
            "OIDC_CREATE_USERS",
            "TRUSTED_USER_HEADER",
            "TRUSTED_GROUPS_HEADER",
        ),
    ),
    (
        "S3 sources",
        ("S3_ENDPOINT_URL", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_REGION", "S3_BUCKETS"),
    ),
    (
        "Code execution",
        (
            "PYTHON_CODE_TIMEOUT",
            "PYTHON_CODE_MAX_MEMORY",
            "PYTHON_CODE_MAX_ITERATIONS",
            "PYTHON_CODE_MAX_RETRIES",
            "PYTHON_CODE_MAX_FILE_SIZE",
            "MAX_UPLOAD_SIZE_MB",
            "PARQUET_CONVERSION_MB",
            "PYTHON_CODE_MAX_FILES_TO_SELECT",
            "PYTHON_EXECUTOR_MODE",
            "SANDBOX",
            "SANDBOX_IDLE_SECONDS",
            "SANDBOX_MAX_PROCESSES",
            "SANDBOX_SELF_CHECK",
            "SANDBOX_REQUIRED",
            "AST_PREFILTER",
        ),
    ),
    (
        "Interactive tables",
        ("TABLE_QUERY_MEMORY_MB", "TABLE_QUERY_THREADS", "TABLE_QUERY_SPILL_MB"),
    ),
    (
        "Data sources",
        ("SOURCE_QUERY_MAX_ROWS", "SOURCE_QUERY_MAX_MB"),
    ),
    (
        "MCP tools for the agents",
        (
            "MCP_STDIO_PROGRAMS",
            "MCP_TOOL_TIMEOUT",
            "MCP_CONNECT_TIMEOUT",
            "MCP_TOOL_MAX_CHARS",
        ),
    ),
    (
        "Per-user and host limits",
        (
            "USER_MAX_SANDBOXES",
            "USER_MAX_RUNS",
            "EVAL_MAX_RUNNING",
            "USER_MAX_MCP_SESSIONS",
            "USER_MAX_DISK_MB",
            "USER_MAX_TOKENS_PER_DAY",
            "USER_MAX_SANDBOX_SECONDS_PER_DAY",
            "HOST_MAX_SANDBOXES",
            "WORK_LIMITS",
            "WORK_WAIT_SECONDS",
        ),
    ),
    (
        "Operations",
        ("METRICS_ENABLED", "METRICS_PORT", "METRICS_HOST", "METRICS_ALLOWED", "TRACE_CONTENT"),
    ),
    (
        "Scale-out",
        ("EXECUTOR_BACKEND", "RAY_ADDRESS", "RAY_NAMESPACE", "WORKSPACE_BUCKET", "RAY_CACHE_DIR"),
    ),
)

INTRO = """\
# Configuration

Every setting is an environment variable, or a line in `.env` in the working directory,
with the same name. An invalid value stops start-up with one line naming the variable.
The USER_* limits are defaults: an admin may set them per user (`PATCH /api/users/{id}`).

This page is generated from `backend/config/settings.py`
(`.venv/bin/python -m backend.config.docs > docs/configuration.md`); edit the descriptions
there, not here.
"""


HEADER = "| variable | default | values | meaning |"


class UndocumentedSetting(Exception):
    """A field has no description, or is missing from (or unknown to) GROUPS."""


def check_groups(fields: dict[str, FieldInfo]) -> None:
    grouped = [name for _, names in GROUPS for name in names]
    ungrouped = [name for name in fields if name not in grouped]
    unknown = [name for name in grouped if name not in fields]
    twice = sorted({name for name in grouped if grouped.count(name) > 1})
    undescribed = [name for name, info in fields.items() if not (info.description or "").strip()]
    problems = [
        f"{label}: {', '.join(names)}"
        for label, names in (
            ("in no group of backend/config/docs.py", ungrouped),
            ("not settings", unknown),
            ("in two groups", twice),
            ("without a description", undescribed),
        )
        if names
    ]
    if problems:
        raise UndocumentedSetting("; ".join(problems))


def render_default(value: object) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Path) and not value.is_absolute():
        value = f"./{value}"
    if isinstance(value, Enum):
        value = value.value
    return f"`{value}`" if value != "" else "empty"


def render_values(info: FieldInfo) -> str:
    """What the setting accepts beyond its type: its choices or its bounds."""
    if get_origin(info.annotation) is Literal:
        return ", ".join(f"`{choice}`" for choice in get_args(info.annotation))
    bounds = []
    for meta in info.metadata:
        for kind, sign in (
            (annotated_types.Ge, "≥"),
            (annotated_types.Gt, ">"),
            (annotated_types.Le, "≤"),
            (annotated_types.Lt, "<"),
        ):
            if isinstance(meta, kind):
                bound = getattr(meta, kind.__name__.lower())
                bounds.append(f"{sign} {int(bound) if bound == int(bound) else bound}")
        if isinstance(meta, annotated_types.MinLen):
            bounds.append(f"at least {meta.min_length} character(s)")
    return ", ".join(bounds)


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render(fields: dict[str, FieldInfo] | None = None) -> str:
    fields = Settings.model_fields if fields is None else fields
    check_groups(fields)
    lines = [INTRO]
    for title, names in GROUPS:
        lines += [f"## {title}", "", HEADER, "|---|---|---|---|"]
        for name in names:
            info = fields[name]
            row = (
                f"`{name}`",
                render_default(info.default),
                render_values(info),
                info.description or "",
            )
            lines.append("| " + " | ".join(cell(part) for part in row) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
