"""Accounts: the admin that exists from the first start, who a credential belongs
to, signing out, personal API keys and deleting a user with everything of theirs."""

from __future__ import annotations

import logging
import os
import secrets
import time
from pathlib import Path

from backend.config import Settings
from backend.core.purge import SessionPurge
from backend.core.security import (
    InvalidToken,
    api_key_hash,
    hash_password,
    is_api_key,
    new_api_key,
    password_version,
    read_access_token,
    verify_password,
)
from backend.storage import ApiKey, Store, User, UsernameTaken

logger = logging.getLogger(__name__)

# DATA_DIR's copy of the generated admin password, for a first sign-in after the console
# has scrolled: removed once the admin's password is changed or set by ADMIN_PASSWORD.
INITIAL_PASSWORD_FILE = "initial_admin_password"


def authenticate(store: Store, secret_key: str, credential: str) -> User | None:
    """The user an access token or a personal API key belongs to; None if it is not
    (any more) valid. A disabled user is returned: callers refuse them by name."""
    if is_api_key(credential):
        return store.user_for_api_key(api_key_hash(credential), time.time())
    try:
        token = read_access_token(credential, secret_key)
    except InvalidToken:
        return None
    user = store.user_for_token(token.user_id, token.token_id)
    # A token issued before a password change names the old password's version.
    if user is None or password_version(user.password_hash) != token.password_version:
        return None
    return user


def sign_out(store: Store, secret_key: str, credential: str) -> None:
    """End an access token now rather than at its expiry (API keys are revoked by id)."""
    try:
        token = read_access_token(credential, secret_key)
    except InvalidToken:
        return  # expired or not ours: nothing to end
    store.revoke_token(token.token_id, token.expires_at)


def create_api_key(store: Store, user_id: int, name: str) -> tuple[ApiKey, str]:
    """A new key for the user: the stored record, and the key itself (never stored)."""
    key = new_api_key()
    return store.create_api_key(user_id, name, api_key_hash(key)), key


async def delete_user(store: Store, purge: SessionPurge, user_id: int) -> bool:
    """Delete the user and every session of theirs; False if there is no such user."""
    # Disabled first, so that no new session of theirs starts while the old ones are purged.
    if store.update_user(user_id, disabled=True) is None:
        return False
    await purge.user(user_id)
    return store.delete_user(user_id)


def ensure_admin(store: Store, settings: Settings) -> None:
    """Create the admin on first start; keep its password in step with ADMIN_PASSWORD.

    Without ADMIN_PASSWORD a random password is generated, printed once and written to
    DATA_DIR/initial_admin_password (mode 0600): only its hash is stored in the database.
    """
    if settings.ADMIN_PASSWORD:
        forget_initial_password(settings.DATA_DIR)  # the admin's password is this one
    admin = store.get_user(settings.ADMIN_USERNAME)
    if admin is None:
        password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(15)
        try:
            store.create_user(settings.ADMIN_USERNAME, hash_password(password), is_admin=True)
        except UsernameTaken:  # another server on the same database made it first
            ensure_admin(store, settings)
            return
        if not settings.ADMIN_PASSWORD:
            kept = _keep_initial_password(settings.DATA_DIR, password)
            _announce_generated_password(settings.ADMIN_USERNAME, password, kept)
        return
    if settings.ADMIN_PASSWORD and not verify_password(
        settings.ADMIN_PASSWORD, admin.password_hash
    ):
        store.set_password_hash(admin.id, hash_password(settings.ADMIN_PASSWORD))
        logger.info("Admin password updated from ADMIN_PASSWORD")


def password_changed(settings: Settings, user: User) -> None:
    """After `user`'s password was changed: the admin's generated one, if kept, is stale."""
    if user.username == settings.ADMIN_USERNAME:
        forget_initial_password(settings.DATA_DIR)


def forget_initial_password(data_dir: Path) -> None:
    """Remove the generated password's file: it is no longer (or never was) the password."""
    path = data_dir / INITIAL_PASSWORD_FILE
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("Could not remove %s (delete it yourself): %s", path, exc.strerror)


def _keep_initial_password(data_dir: Path, password: str) -> Path | str:
    """Write the password to a new file only this user can read; its absolute path, or why
    it could not be written."""
    path = (data_dir / INITIAL_PASSWORD_FILE).absolute()
    forget_initial_password(data_dir)  # a stale one, from a database since replaced
    try:
        # Created with its final mode; O_EXCL: never through a link someone left there.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(password + "\n")
    except OSError as exc:
        os.unlink(path)  # not half a password
        return exc.strerror or str(exc)
    return path


def _announce_generated_password(username: str, password: str, kept: Path | str) -> None:
    # Printed, not logged: log files outlive the console and must not hold it.
    if isinstance(kept, Path):
        where = (
            f"  Also written to {kept}\n"
            "  (readable only by this user); delete it once you have signed in\n"
            "  or changed the password.\n"
        )
    else:
        where = f"  It could not be written to DATA_DIR/{INITIAL_PASSWORD_FILE}: {kept}.\n"
    print(
        "\n" + "=" * 64 + "\n"
        f"  First start: created admin user '{username}'\n"
        f"  ADMIN_PASSWORD={password}\n"
        f"{where}"
        "  Only its hash is stored in the database.\n" + "=" * 64 + "\n",
        flush=True,
    )
