"""Our agents as MCP clients: the connections to the MCP servers an admin registered.

`McpLinks` keeps one `ServerLink` per registered server; a link owns the server's
connection (and, for a stdio server, its child process: never inside the code
sandbox, but in a bubblewrap of its own without DATA_DIR, `program.py`), lists its
tools and calls them under a time limit, its result cut to a size.
The core layer decides which servers and tools a user's agents are offered.
"""

from __future__ import annotations

from backend.tools.mcp_client.endpoint import Endpoint, ToolInfo, ToolOutcome
from backend.tools.mcp_client.link import ServerLink
from backend.tools.mcp_client.links import McpLinks
from backend.tools.mcp_client.program import ProgramBounds, hidden_paths

__all__ = [
    "Endpoint",
    "McpLinks",
    "ProgramBounds",
    "ServerLink",
    "ToolInfo",
    "ToolOutcome",
    "hidden_paths",
]
