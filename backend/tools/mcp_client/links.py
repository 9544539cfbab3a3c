"""Every registered server's link, kept while its settings stay the same."""

from __future__ import annotations

import asyncio

from backend.tools.mcp_client.endpoint import Endpoint
from backend.tools.mcp_client.link import ServerLink
from backend.tools.mcp_client.program import ProgramBounds


class McpLinks:
    """One `ServerLink` per server id. An admin's edit (a new fingerprint) replaces the
    link, stopping the old connection; `close` stops them all (the server's shutdown)."""

    def __init__(
        self,
        bounds: ProgramBounds,
        *,
        connect_timeout: float,
        call_timeout: float,
        max_chars: int,
    ) -> None:
        self.bounds = bounds  # where and how stdio servers' programs run
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.max_chars = max_chars
        self._links: dict[int, ServerLink] = {}
        self._lock = asyncio.Lock()

    async def link(self, server_id: int, endpoint: Endpoint) -> ServerLink:
        async with self._lock:
            link = self._links.get(server_id)
            if link is not None and link.fingerprint == endpoint.fingerprint():
                return link
            if link is not None:
                await link.close()
            link = ServerLink(
                endpoint,
                label=str(server_id),
                bounds=self.bounds,
                connect_timeout=self.connect_timeout,
                call_timeout=self.call_timeout,
                max_chars=self.max_chars,
            )
            self._links[server_id] = link
            return link

    async def drop(self, server_id: int) -> None:
        """Stop a server that was deleted."""
        async with self._lock:
            link = self._links.pop(server_id, None)
        if link is not None:
            await link.close()

    async def close(self) -> None:
        async with self._lock:
            links, self._links = list(self._links.values()), {}
        await asyncio.gather(*(link.close() for link in links))
        self.bounds.close()
