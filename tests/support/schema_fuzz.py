"""Schemathesis against a live server: what its test and its benchmark share.

The server answers every chat on the scripted model with one repeated reply. The
schema comes from the server's own `/openapi.json` and sends the admin's bearer
token with every request (schemathesis still leaves it out on purpose, to see the
401s). Failed logins among the fuzzed ones throttle the address (429, documented);
the token was taken before, and nothing in the API deletes the admin or changes its
password, so the run cannot lock itself out.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.support.live_server import LiveServer

REPLIES = [{"content": "A fuzzed request's answer.", "repeat": True}]

# Issue 12's goal: no response of 500 or above, and every response as the schema says.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


def load_schema(server: LiveServer, **config: Any) -> OpenApiSchema:
    """The server's schema, set to run `CHECKS` with the admin's token; `config` adds
    schemathesis.toml settings (e.g. `seed`, `generation`)."""
    settings = {
        "headers": {"Authorization": f"Bearer {server.token()}"},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "request-timeout": 60,
        **config,
    }
    return schemathesis.openapi.from_url(
        f"{server.url}/openapi.json", config=schemathesis.Config.from_dict(settings)
    )
