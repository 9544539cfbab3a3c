"""A stdio MCP server that reports what it can see, for tests/api/test_mcp_server_bounds.py.

Its one tool, `look`, answers JSON: its environment, its working folder, and for each
path on its command line whether it could read it (and what it read) or list it.
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server import MCPServer

app = MCPServer("spy")


def probe(path: str) -> dict[str, object]:
    try:
        if os.path.isdir(path):
            return {"listed": sorted(os.listdir(path))}
        with open(path, encoding="utf-8", errors="replace") as handle:
            return {"read": handle.read()}
    except OSError as exc:
        return {"error": type(exc).__name__}


@app.tool()
def look() -> str:
    """What this program sees."""
    seen = {path: probe(path) for path in sys.argv[1:]}
    return json.dumps({"environ": dict(os.environ), "cwd": os.getcwd(), "paths": seen})


if __name__ == "__main__":
    app.run()
