"""The admin account that exists from the first start."""

from __future__ import annotations

import logging
import secrets

from backend.config import Settings
from backend.core.security import hash_password, verify_password
from backend.storage import Store, UsernameTaken

logger = logging.getLogger(__name__)


def ensure_admin(store: Store, settings: Settings) -> None:
    """Create the admin on first start; keep its password in step with ADMIN_PASSWORD.

    Without ADMIN_PASSWORD a random password is generated and printed once: only
    its hash is stored, so it cannot be shown again.
    """
    admin = store.get_user(settings.ADMIN_USERNAME)
    if admin is None:
        password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(15)
        try:
            store.create_user(settings.ADMIN_USERNAME, hash_password(password), is_admin=True)
        except UsernameTaken:  # another server on the same database made it first
            ensure_admin(store, settings)
            return
        if not settings.ADMIN_PASSWORD:
            _announce_generated_password(settings.ADMIN_USERNAME, password)
        return
    if settings.ADMIN_PASSWORD and not verify_password(
        settings.ADMIN_PASSWORD, admin.password_hash
    ):
        store.set_password_hash(admin.id, hash_password(settings.ADMIN_PASSWORD))
        logger.info("Admin password updated from ADMIN_PASSWORD")


def _announce_generated_password(username: str, password: str) -> None:
    # Printed, not logged: log files outlive the console and must not hold it.
    print(
        "\n" + "=" * 64 + "\n"
        f"  First start: created admin user '{username}'\n"
        f"  ADMIN_PASSWORD={password}\n"
        "  It is shown only this once; only its hash is stored.\n" + "=" * 64 + "\n",
        flush=True,
    )
