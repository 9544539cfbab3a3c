"""The account a single sign-on lands in: the user its issuer and subject were linked to,
else a new one (when OIDC_CREATE_USERS allows), with the name, email and groups the
provider gave this time.

A user is never matched by name or email: an identity provider's "admin" becomes a new user
("admin-2"), not the local admin. A user made here has a random password nobody knows, so
they can only sign in through the provider.
"""

from __future__ import annotations

import logging
import re
import secrets

from backend.config import Settings
from backend.core.oidc import Identity, SignInRefused, group_names
from backend.core.security import hash_password
from backend.storage import IdentityTaken, Store, User, UsernameTaken
from backend.storage.groups import GROUP_NAME_PATTERN

logger = logging.getLogger(__name__)

_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_.@-]+")
_GROUP_NAME = re.compile(GROUP_NAME_PATTERN)
# The issuer of identities an authenticating proxy vouches for (TRUSTED_USER_HEADER).
PROXY_ISSUER = "trusted-proxy"
NAME_TRIES = 20  # "name", "name-2", ... before giving up on a taken name


def signed_on(store: Store, settings: Settings, identity: Identity) -> User:
    """The user `identity` signs in as, brought up to date (a refusal if there is none
    and none may be made, or if they are disabled)."""
    user_id = store.user_id_for_identity(identity.issuer, identity.subject)
    user = store.get_user_by_id(user_id) if user_id is not None else None
    if user is None:
        if not settings.OIDC_CREATE_USERS:
            raise SignInRefused(
                "You signed in at the identity provider, but you have no account here and "
                "this server makes none at sign-in (OIDC_CREATE_USERS=false): ask an admin.",
                "no_account",
            )
        user = _new_user(store, settings, identity)
    if user.disabled:
        raise SignInRefused("This account is disabled: ask an admin.", "account_disabled")
    if (user.email, user.display_name) != (identity.email, identity.display_name):
        email, name = identity.email, identity.display_name
        user = store.update_user(user.id, email=email, display_name=name) or user
    if identity.groups is not None:
        names = [name for name in identity.groups if _GROUP_NAME.match(name)]
        if len(names) < len(identity.groups):
            logger.warning(
                "Group names the identity provider sent that are not valid were left out"
            )
        store.sync_claimed_groups(user.id, names)
    return user


def proxy_identity(name: str, groups: str | None) -> Identity:
    """Who an authenticating proxy says signed in (`groups`: its comma-separated header;
    None when it sends none)."""
    return Identity(
        issuer=PROXY_ISSUER,
        subject=name,
        username=name,
        email="",
        display_name="",
        groups=None if groups is None else group_names(groups),
    )


def _new_user(store: Store, settings: Settings, identity: Identity) -> User:
    base = _NOT_IN_NAMES.sub("-", identity.username).strip("-.")[:140] or "user"
    unusable = hash_password(secrets.token_urlsafe(32), settings.PASSWORD_HASH_ROUNDS)
    for attempt in range(1, NAME_TRIES + 1):
        name = base if attempt == 1 else f"{base}-{attempt}"
        try:
            user = store.create_user(name, unusable)
            break
        except UsernameTaken:
            continue
    else:
        raise SignInRefused(
            f"Every account name like '{base}' is taken here: ask an admin.", "name_taken"
        )
    try:
        store.link_identity(user.id, identity.issuer, identity.subject)
    except IdentityTaken:  # the same person's other sign-in made theirs first
        store.delete_user(user.id)
        found = store.user_id_for_identity(identity.issuer, identity.subject)
        linked = store.get_user_by_id(found) if found is not None else None
        if linked is None:
            raise SignInRefused("Signing in failed halfway: try again.", "try_again") from None
        return linked
    logger.info("User %d (%s) was created at their first single sign-on", user.id, name)
    return user
