"""Every path setting is absolute once settings load, whatever the environment gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import Settings, load_settings

PATH_SETTINGS = (
    "DATA_DIR",
    "RAY_CACHE_DIR",
    "EMBEDDED_MODEL_PATH",
    "SCRIPTED_REPLIES",
    "DATABASE_URL",
)


def paths(settings: Settings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in PATH_SETTINGS}


def test_relative_paths_are_taken_from_the_directory_the_server_starts_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.delenv("DATA_DIR", raising=False)
    settings = load_settings(
        RAY_CACHE_DIR="cache",
        EMBEDDED_MODEL_PATH="models/../models/small.gguf",
        SCRIPTED_REPLIES="./replies.json",
        DATABASE_URL="sqlite:///db/app.db",
    )
    assert paths(settings) == {
        "DATA_DIR": tmp_path / "data",  # the default, `./data`
        "RAY_CACHE_DIR": tmp_path / "cache",
        "EMBEDDED_MODEL_PATH": str(tmp_path / "models/small.gguf"),
        "SCRIPTED_REPLIES": str(tmp_path / "replies.json"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db/app.db'}",
    }


def test_home_is_expanded_and_absolute_or_empty_values_stay_as_they_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = load_settings(
        DATA_DIR="~/agent-data",
        RAY_CACHE_DIR="/var/cache/agent",
        EMBEDDED_MODEL_PATH="",
        SCRIPTED_REPLIES="",
        DATABASE_URL="postgresql://agent:secret@db.internal:5432/agent",
    )
    assert paths(settings) == {
        "DATA_DIR": tmp_path / "home/agent-data",
        "RAY_CACHE_DIR": Path("/var/cache/agent"),
        "EMBEDDED_MODEL_PATH": "",
        "SCRIPTED_REPLIES": "",
        "DATABASE_URL": "postgresql://agent:secret@db.internal:5432/agent",
    }


def test_a_relative_data_dir_from_the_environment_is_made_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATA_DIR", "var/data")
    assert paths(load_settings())["DATA_DIR"] == tmp_path / "var/data"
