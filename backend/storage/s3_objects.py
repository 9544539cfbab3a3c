"""S3 sources: which objects may be read (`S3_BUCKETS`), listing them, and their errors.

Names are `s3://bucket/key`. Only buckets, or `bucket/prefix` folders, in the
allowlist are listed or read; anything else is `S3Forbidden` (403). Failures
from the endpoint become `S3NotFound` (404) or `S3Unavailable` (502: it
answered with an error, such as refused credentials; 503: it could not be
reached), whose messages name the endpoint and the error code and never a
credential. The client is boto3's, with path-style addressing for
S3-compatible servers (SeaweedFS, MinIO, Ceph).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from backend.config import Settings
from backend.storage.workspaces import SUPPORTED_EXTENSIONS, UnsafePath, safe_relative

MAX_LISTED = 500  # objects per listing, across the allowlist
PREFIX = "s3://"

# botocore logs request headers at DEBUG; nothing of a request belongs in our logs.
logging.getLogger("botocore").setLevel(logging.WARNING)


class S3Error(Exception):
    """An S3 failure with the HTTP status and code the API answers with."""

    status = 502
    code = "s3_error"


class S3Forbidden(S3Error):
    status = 403
    code = "s3_forbidden"


class S3NotFound(S3Error):
    status = 404
    code = "file_not_found"


class S3Unavailable(S3Error):
    code = "s3_unavailable"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class S3TooLarge(S3Error):
    status = 413
    code = "file_too_large"


class S3NoRoom(S3Error):
    status = 507
    code = "insufficient_storage"


def is_s3(name: str) -> bool:
    return name.startswith(PREFIX)


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    @classmethod
    def parse(cls, name: str) -> S3Location:
        """`s3://bucket/key`; raises `UnsafePath` for anything a workspace path could not be."""
        bucket, _, key = name.removeprefix(PREFIX).partition("/")
        if not is_s3(name) or not bucket or not key or key.endswith("/"):
            raise UnsafePath(name)
        safe_relative(f"{bucket}/{key}")  # the cached copy's path: no .., no oddities
        return cls(bucket, key)

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.bucket}/{self.key}"

    @property
    def cached_path(self) -> str:
        """Where the object's copy lives in a session's workspace."""
        return f"s3/{self.bucket}/{self.key}"


@dataclass(frozen=True)
class Allowed:
    """One allowlist entry: a whole bucket, or the objects under `prefix` (a folder)."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, entry: str) -> Allowed:
        bucket, _, prefix = entry.strip().removeprefix(PREFIX).strip("/").partition("/")
        return cls(bucket, f"{prefix.strip('/')}/" if prefix.strip("/") else "")

    def covers(self, location: S3Location) -> bool:
        return location.bucket == self.bucket and location.key.startswith(self.prefix)


@dataclass(frozen=True)
class S3Object:
    location: S3Location
    size: int
    etag: str


@dataclass(frozen=True)
class S3Config:
    """What reaching S3 takes; plain data, so the isolated helper can get a copy."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    region: str
    allowed: tuple[Allowed, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Config | None:
        """None when no bucket is allowed: S3 is then off."""
        entries = [e for e in settings.S3_BUCKETS.split(",") if e.strip().strip("/")]
        if not entries:
            return None
        return cls(
            endpoint_url=settings.S3_ENDPOINT_URL,
            access_key_id=settings.S3_ACCESS_KEY_ID,
            secret_access_key=settings.S3_SECRET_ACCESS_KEY,
            region=settings.S3_REGION,
            allowed=tuple(Allowed.parse(entry) for entry in entries),
        )

    @property
    def endpoint(self) -> str:
        """The endpoint as messages name it (any user:password@ in the URL is dropped)."""
        if not self.endpoint_url:
            return f"AWS S3 ({self.region})"
        parts = urlsplit(self.endpoint_url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


_clients: dict[S3Config, Any] = {}
_clients_lock = threading.Lock()


def client(config: S3Config) -> Any:
    """One boto3 client per configuration and process (clients are thread-safe)."""
    with _clients_lock:
        if config not in _clients:
            import boto3  # type: ignore[import-untyped]
            from botocore.config import Config  # type: ignore[import-untyped]

            _clients[config] = boto3.session.Session().client(
                "s3",
                endpoint_url=config.endpoint_url or None,
                aws_access_key_id=config.access_key_id or None,
                aws_secret_access_key=config.secret_access_key or None,
                region_name=config.region,
                config=Config(
                    s3={"addressing_style": "path"} if config.endpoint_url else {},
                    connect_timeout=5,
                    read_timeout=60,
                    retries={"max_attempts": 3, "mode": "standard"},
                ),
            )
        return _clients[config]


def check_allowed(config: S3Config | None, name: str) -> S3Location:
    """The location of `name`, if S3 is on and the allowlist covers it; else `S3Forbidden`."""
    location = S3Location.parse(name)
    if config is None:
        raise S3Forbidden(f"{name}: S3 sources are off (set S3_BUCKETS to allow some)")
    if not any(allowed.covers(location) for allowed in config.allowed):
        raise S3Forbidden(f"{name} is outside the allowed S3 buckets (S3_BUCKETS)")
    return location


def translated(exc: Exception, config: S3Config, name: str) -> S3Error:
    """A botocore failure as the error the API answers with (no credential in it)."""
    from botocore.exceptions import (  # type: ignore[import-untyped]
        BotoCoreError,
        ClientError,
        ConnectionError,
        NoCredentialsError,
    )

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "unknown"))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in ("NoSuchKey", "NoSuchBucket", "NotFound", "404") or status == 404:
            return S3NotFound(f"{name} does not exist")
        if status in (500, 502, 503, 504):
            return S3Unavailable(f"S3 at {config.endpoint} failed ({code}) for {name}", 503)
        return S3Unavailable(
            f"S3 at {config.endpoint} refused the request ({code}) for {name}", 502
        )
    if isinstance(exc, NoCredentialsError):
        return S3Unavailable(f"no credentials for S3 at {config.endpoint}", 502)
    if isinstance(exc, ConnectionError | BotoCoreError | OSError):
        return S3Unavailable(f"S3 at {config.endpoint} is not reachable", 503)
    return S3Unavailable(f"S3 at {config.endpoint} failed for {name}", 502)


def head(config: S3Config, location: S3Location) -> S3Object:
    """The object's size and ETag (one HEAD request)."""
    try:
        answer = client(config).head_object(Bucket=location.bucket, Key=location.key)
    except Exception as exc:
        raise translated(exc, config, location.name) from None
    return S3Object(location, int(answer["ContentLength"]), str(answer.get("ETag", "")))


def list_objects(config: S3Config) -> list[S3Object]:
    """Data files under the allowlist (supported extensions, safe names), in name order."""
    found: dict[S3Location, S3Object] = {}
    for allowed in config.allowed:
        for entry in _pages(config, allowed):
            if len(found) >= MAX_LISTED:
                break
            try:
                location = S3Location.parse(f"{PREFIX}{allowed.bucket}/{entry['Key']}")
            except UnsafePath:
                continue
            if PurePosixPath(location.key).suffix.lower().removeprefix(".") in SUPPORTED_EXTENSIONS:
                etag = str(entry.get("ETag", ""))
                found[location] = S3Object(location, int(entry["Size"]), etag)
    return sorted(found.values(), key=lambda o: o.location.name)


def _pages(config: S3Config, allowed: Allowed) -> Iterator[dict[str, Any]]:
    name = f"{PREFIX}{allowed.bucket}/{allowed.prefix}"
    try:
        pages = (
            client(config)
            .get_paginator("list_objects_v2")
            .paginate(
                Bucket=allowed.bucket,
                Prefix=allowed.prefix,
                PaginationConfig={"MaxItems": MAX_LISTED},
            )
        )
        for page in pages:
            yield from page.get("Contents", [])
    except Exception as exc:
        raise translated(exc, config, name) from None
