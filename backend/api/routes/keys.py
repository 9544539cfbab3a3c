"""Personal API keys: for OpenAI clients and scripts, used like an access token.

A key is shown once, when it is created; the server keeps only its hash. Each user
sees and revokes only their own keys.
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from backend.api.deps import CurrentUser, RecordId, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core import accounts
from backend.models.auth import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic
from backend.storage import ApiKey

router = APIRouter(prefix="/api/keys", tags=["keys"], responses=CLIENT_ERRORS)


def _public(key: ApiKey) -> ApiKeyPublic:
    return ApiKeyPublic(
        id=key.id, name=key.name, created_at=key.created_at, last_used_at=key.last_used_at
    )


@router.get("")
async def read_keys(user: CurrentUser, store: StoreDep) -> list[ApiKeyPublic]:
    """List your API keys, oldest first (never the keys themselves)."""
    return [_public(key) for key in store.list_api_keys(user.id)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_key(body: ApiKeyCreate, user: CurrentUser, store: StoreDep) -> ApiKeyCreated:
    """Create an API key; the answer holds the key, shown only this once."""
    key, secret = accounts.create_api_key(store, user.id, body.name)
    return ApiKeyCreated(**_public(key).model_dump(), key=secret)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_key(key_id: RecordId, user: CurrentUser, store: StoreDep) -> Response:
    """Revoke one of your API keys: it stops working at once."""
    if not store.delete_api_key(user.id, key_id):
        raise ApiError(404, "API key not found.", code="api_key_not_found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
