"""An API server's side of workspaces kept in S3 (EXECUTOR_BACKEND=ray, docs/scale-out.md).

The server's `DATA_DIR/scratch` becomes a cache: it pushes an upload once it has
landed, and pulls what other servers and the session's actor wrote before it reads
the workspace (a listing, a download, a turn). Without WORKSPACE_BUCKET both are no-ops.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from backend.storage.mirror import WorkspaceMirror
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces


class SharedWorkspaces:
    def __init__(self, workspaces: Workspaces, mirror: WorkspaceMirror | None) -> None:
        self.workspaces = workspaces
        self.mirror = mirror

    async def pull(self, session_id: SessionKey) -> None:
        """Bring this server's copy up to date with S3."""
        if self.mirror is not None:
            local = await run_in_threadpool(self.workspaces.ensure, session_id)
            await run_in_threadpool(self.mirror.pull, session_id, local)

    async def push(self, session_id: SessionKey) -> None:
        """Send what changed in this server's copy to S3."""
        if self.mirror is not None:
            local = await run_in_threadpool(self.workspaces.ensure, session_id)
            await run_in_threadpool(self.mirror.push, session_id, local)

    async def remove(self, session_id: SessionKey) -> None:
        """Delete the session's files here and in S3 (a deleted session)."""
        await run_in_threadpool(self.workspaces.remove, session_id)
        if self.mirror is not None:
            await run_in_threadpool(self.mirror.remove, session_id)
