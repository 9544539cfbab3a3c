"""Settings: defaults, validation, and the one-line start-up error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backend.config import ConfigError, Settings, load_settings
from tests.support.live_server import ROOT


def test_defaults_match_the_documented_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT / "tests")  # no .env here
    settings = Settings()
    assert (settings.HOST, settings.PORT) == ("127.0.0.1", 1007)
    assert settings.DATA_DIR == ROOT / "tests" / "data"  # `./data`, from where it started
    assert settings.LLM_BACKEND == "auto"
    assert settings.OLLAMA_HOST == "http://127.0.0.1:11434"
    assert settings.JWT_EXPIRATION_HOURS == 24
    assert (settings.PYTHON_CODE_TIMEOUT, settings.PYTHON_CODE_MAX_MEMORY) == (30, 512)
    assert (settings.PYTHON_CODE_MAX_ITERATIONS, settings.PYTHON_CODE_MAX_RETRIES) == (3, 5)
    assert settings.PYTHON_CODE_MAX_FILE_SIZE == 50
    assert (settings.PYTHON_EXECUTOR_MODE, settings.SANDBOX) == ("native", "auto")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PORT", "not-a-port"),
        ("PORT", "70000"),
        ("LLM_BACKEND", "gpt"),
        ("SANDBOX", "docker"),
        ("OLLAMA_HOST", "localhost:11434"),
        ("SECRET_KEY", "changethis"),
        ("OIDC_ISSUER", "idp.example.org"),
        ("OIDC_ISSUER", "https://idp.example.org"),  # with no client to sign in as
        ("TRUSTED_USER_HEADER", "X-User: admin"),
    ],
)
def test_invalid_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    message = str(error.value)
    assert variable in message
    assert "\n" not in message


def start_backend(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "run_backend.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_server_refuses_to_start_with_a_one_line_error() -> None:
    env = {**os.environ, "PORT": "abc", "DATA_DIR": "/nonexistent/never-created"}
    result = start_backend(env)
    assert result.returncode == 2
    assert result.stderr.startswith("error: Invalid configuration: PORT:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_explicit_backend_without_its_settings_stops_start_up(tmp_path: os.PathLike[str]) -> None:
    env = {**os.environ, "LLM_BACKEND": "openai", "DATA_DIR": str(tmp_path), "PORT": "1"}
    env.pop("OPENAI_BASE_URL", None)
    result = start_backend(env)
    assert result.returncode == 2
    assert "OPENAI_BASE_URL: required when LLM_BACKEND=openai" in result.stderr
