"""Accounts: the admin that exists from the first start, who a credential belongs
to, signing out (one token, or every credential at once), personal API keys and deleting a
user with everything of theirs.

A user's credentials end together: a token names the user's credentials version (their
password's hash and credentials epoch), so a new password ends every token; moving the
epoch on (`Store.end_credentials`) also ends them and deletes every API key. An admin's reset
and "sign out everywhere" always do that; a user's own password change does by default."""

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
    create_access_token,
    credentials_version,
    hash_password,
    is_api_key,
    new_api_key,
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
    # A token issued before a password change, or before its user's credentials were
    # ended, names an older version.
    if user is None or version_of(user) != token.credentials_version:
        return None
    return user


def version_of(user: User) -> str:
    """What a token of `user`'s names now: their password's hash and credentials epoch."""
    return credentials_version(user.password_hash, user.credentials_epoch)


def access_token(user: User, secret_key: str, hours: float) -> str:
    """A new access token for `user`, valid until their credentials change or it expires."""
    return create_access_token(user.id, version_of(user), secret_key, hours)


def sign_out(store: Store, secret_key: str, credential: str) -> None:
    """End an access token now rather than at its expiry (API keys are revoked by id)."""
    try:
        token = read_access_token(credential, secret_key)
    except InvalidToken:
        return  # expired or not ours: nothing to end
    store.revoke_token(token.token_id, token.expires_at)


def sign_out_everywhere(store: Store, user_id: int) -> None:
    """Every access token and API key of the user ends now."""
    store.end_credentials(user_id)
    logger.info("Every credential of user %d was ended", user_id)


def set_password(
    settings: Settings, store: Store, user: User, password: str, *, end_credentials: bool
) -> User | None:
    """Give `user` a new password: their tokens end (they name the old one), and with
    `end_credentials` their API keys too. The user as changed (None if deleted meanwhile)."""
    changed = store.set_password_hash(
        user.id,
        hash_password(password, settings.PASSWORD_HASH_ROUNDS),
        end_credentials=end_credentials,
    )
    password_changed(settings, user)
    return changed


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
            hashed = hash_password(password, settings.PASSWORD_HASH_ROUNDS)
            store.create_user(settings.ADMIN_USERNAME, hashed, is_admin=True)
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
        # A password set from outside is a reset: the admin's keys end with their tokens.
        store.set_password_hash(
            admin.id,
            hash_password(settings.ADMIN_PASSWORD, settings.PASSWORD_HASH_ROUNDS),
            end_credentials=True,
        )
        logger.info("Admin password updated from ADMIN_PASSWORD; its tokens and API keys ended")


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
