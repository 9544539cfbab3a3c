"""Start the API server with the configured settings: `python run_backend.py`."""

from __future__ import annotations

import logging
import sys

import uvicorn

from backend.config import ConfigError, load_settings
from backend.main import create_app


def main() -> int:
    try:
        settings = load_settings()
        logging.basicConfig(
            level=settings.LOG_LEVEL, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        app = create_app(settings)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=settings.HOST, port=settings.PORT, log_level=settings.LOG_LEVEL.lower())
    return 0


if __name__ == "__main__":
    sys.exit(main())
