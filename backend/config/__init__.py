"""Configuration: one pydantic-settings class, read from the environment and `.env`."""

from backend.config.settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]
