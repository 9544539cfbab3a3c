"""Secrets the server keeps for itself (an MCP server's headers), sealed with its key.

The key is derived from SECRET_KEY (HKDF-SHA256, with this use as its label), so a
stolen database alone reveals no secret, and the same SECRET_KEY on every API server
opens them all. Changing SECRET_KEY makes the sealed secrets unreadable: an admin
enters them again.
"""

from __future__ import annotations

import base64
import json

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_LABEL = b"python-data-agent: sealed secrets v1"


class SecretsUnreadable(Exception):
    """Sealed under another SECRET_KEY (or damaged)."""


def _fernet(secret_key: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_LABEL).derive(
        secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def seal(secrets: dict[str, str], secret_key: str) -> str:
    """`secrets` as ciphertext; "" for none."""
    if not secrets:
        return ""
    return _fernet(secret_key).encrypt(json.dumps(secrets).encode()).decode()


def unseal(sealed: str, secret_key: str) -> dict[str, str]:
    if not sealed:
        return {}
    try:
        data = json.loads(_fernet(secret_key).decrypt(sealed.encode()))
    except (InvalidToken, ValueError):
        raise SecretsUnreadable from None
    return {str(k): str(v) for k, v in data.items()}
