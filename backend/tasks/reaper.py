"""Stops sandbox workers that have been idle too long (their variables stay on disk), and
ends the sandboxes of OpenAI containers past their expiry."""

from __future__ import annotations

import asyncio
import logging

from backend.core.containers import Containers
from backend.tools.sandbox.pool import SessionExecutors

logger = logging.getLogger(__name__)


async def reap_idle_workers(pool: SessionExecutors, idle_seconds: float) -> None:
    interval = max(min(idle_seconds / 4, 60.0), 0.5)
    while True:
        await asyncio.sleep(interval)
        try:
            await pool.reap_idle(idle_seconds)
        except Exception:  # a failed sweep must not end the loop
            logger.exception("Reaping idle sandbox workers failed")


async def expire_containers(containers: Containers, interval: float = 30.0) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await containers.expire_due()
        except Exception:  # a failed sweep must not end the loop
            logger.exception("Expiring containers failed")
