"""Login and user schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from backend.models.common import Text


class LoginRequest(BaseModel):
    username: Text = Field(min_length=1, max_length=150)
    password: Text = Field(min_length=1, max_length=1024)


class Token(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"


class UserCreate(BaseModel):
    username: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,150}$")
    password: Text = Field(min_length=8, max_length=1024)
    is_admin: bool = False


class UserPublic(BaseModel):
    id: int
    username: str
    is_admin: bool
