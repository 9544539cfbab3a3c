"""Another API server, as far as Ray can tell: a fresh process and driver that builds its own
RayExecutorPool, runs one piece of code in a session, and prints the result as JSON with
the node of the session's actor.

    python -m tests.scale.other_driver ADDRESS DATA_DIR CACHE_DIR SESSION CODE
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.ray_pool import RayExecutorPool, actor_name
from tests.support.ray_cluster import ray_settings  # before Ray: it keeps Ray on loopback


async def main(address: str, data_dir: str, cache_dir: str, session: str, code: str) -> None:
    import ray

    settings = ray_settings(address, Path(data_dir), Path(cache_dir))
    pool = RayExecutorPool(settings, Workspaces(settings.DATA_DIR), None)
    result = await pool.get_python_executor(session).run(code)
    node = await ray.get_actor(actor_name(session), namespace=settings.RAY_NAMESPACE).node.remote()
    print(json.dumps({"result": dataclasses.asdict(result), "node": node}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
