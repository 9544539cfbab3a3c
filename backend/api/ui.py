"""The browser UI: `frontend/` served at `/`, same origin as the API, under a strict CSP.

The page's scripts are ES modules from `frontend/assets` (its libraries are copied
into `assets/vendor/` by `make frontend`); nothing inline runs. KaTeX sets
element `style` attributes, hence `style-src-attr`; every model-written string
still goes through the sanitizer first.
"""

from __future__ import annotations

import logging
import mimetypes
import os
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import Scope

logger = logging.getLogger(__name__)

FRONTEND_DIR = Path(__file__).resolve().parents[2] / "frontend"
ASSETS_DIR = FRONTEND_DIR / "assets"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "frame-src 'self'",  # the chart frame
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    )
)
UI_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidate (ETag), so an update shows at once
}

# The chart frame (chart-frame.html) runs one chart's library (Plotly or Vega) in an opaque
# origin, in a process of its own where the browser isolates sandboxed frames: it reads
# nothing of the page's and never talks to the API (charts.js posts it the spec). Sandboxed
# by this header as well as by the <iframe>'s attribute, so it is walled off even when
# opened on its own. Plotly draws heatmaps and its "download as PNG" through data: images,
# harmless in here.
CHART_FRAME_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' blob: data:",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'self'",
        "sandbox allow-scripts allow-downloads",
    )
)
CHART_FRAME_HEADERS = {
    **UI_HEADERS,
    "Content-Security-Policy": CHART_FRAME_POLICY,
    "X-Frame-Options": "SAMEORIGIN",
}

mimetypes.add_type("text/javascript", ".mjs")  # module scripts need a JavaScript type

router = APIRouter(include_in_schema=False)


@router.get("/")
async def read_ui() -> Response:
    """The chat UI's page."""
    return FileResponse(FRONTEND_DIR / "index.html", headers=UI_HEADERS)


@router.get("/chart-frame")
async def read_chart_frame() -> Response:
    """The sandboxed frame that draws one Plotly figure (assets/js/chart-frame.js)."""
    return FileResponse(FRONTEND_DIR / "chart-frame.html", headers=CHART_FRAME_HEADERS)


class _Assets(StaticFiles):
    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:  # fmt: skip
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(UI_HEADERS)
        return response


def mount_ui(app: FastAPI) -> None:
    if not (ASSETS_DIR / "vendor" / ".installed").exists():
        logger.warning("The UI's libraries are missing: run `make frontend` (or `make run`).")
    app.include_router(router)
    app.mount("/assets", _Assets(directory=ASSETS_DIR, check_dir=False), name="assets")
