"""Files of a workspace copy moved to and from S3 objects, several at a time.

A file under the multipart threshold moves in one request (PutObject, or GetObject
with If-Match on the ETag it was listed with), up to WORKERS files at once. A bigger
one streams through boto3's managed transfer in parallel parts, one file after
another, so no more than WORKERS requests are in flight (botocore pools 10
connections). Files are read and written by descriptor (`workspace_tree`), never
through a link. S3 failures become the `S3Error` family, a full disk `S3NoRoom`.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from backend.storage import workspace_tree
from backend.storage.s3_objects import S3Config, S3Error, S3NoRoom, client, translated
from backend.storage.workspaces import NotARegularFile

MIB = 1024**2
MULTIPART_THRESHOLD = 64 * MIB
PART = 16 * MIB
MIN_PART = 5 * MIB  # S3's smallest multipart part
WORKERS = 8
PIECE = 1 * MIB
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Synced:
    """A file as it was when last synced: the copy's size and mtime, the object's ETag."""

    size: int
    mtime_ns: int
    etag: str


@dataclass(frozen=True)
class S3File:
    key: str
    size: int
    etag: str


class ObjectTransfer:
    def __init__(
        self, config: S3Config, bucket: str, multipart_threshold: int = MULTIPART_THRESHOLD
    ) -> None:
        from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped]

        if multipart_threshold < MIN_PART:
            raise ValueError(f"multipart_threshold must be at least {MIN_PART} bytes")
        self.config = config
        self.bucket = bucket
        self.threshold = multipart_threshold
        self.managed = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=min(PART, multipart_threshold),
            max_concurrency=WORKERS,
        )

    def upload(self, root: int, relative: str, key: str) -> Synced | None:
        """Upload the regular file `relative` under `root`; None if it is gone or not one."""
        try:
            fd = workspace_tree.open_regular(root, relative.split("/"))
        except (OSError, NotARegularFile):
            return None  # gone, or replaced by a link, since it was listed
        s3 = client(self.config)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)  # before reading: a change while uploading goes next time
            try:
                if info.st_size < self.threshold:
                    etag = s3.put_object(Bucket=self.bucket, Key=key, Body=handle)["ETag"]
                else:
                    s3.upload_fileobj(handle, self.bucket, key, Config=self.managed)
                    etag = s3.head_object(Bucket=self.bucket, Key=key)["ETag"]
            except Exception as exc:
                raise self.failure(exc, key) from None
        return Synced(info.st_size, info.st_mtime_ns, str(etag))

    def download(self, root: int, relative: str, found: S3File) -> Synced | None:
        """Download `found` over the file `relative` under `root` (a draft, renamed into
        place); None if something the sandbox put there is in the way."""
        try:
            draft = workspace_tree.draft(root, relative.split("/"))
        except OSError as exc:  # a file where a folder should be, or a link
            log.warning("workspace mirror: cannot write %r: %s", relative, exc.strerror)
            return None
        try:
            try:
                s3 = client(self.config)
                with os.fdopen(os.dup(draft.fd), "wb") as out:
                    if found.size < self.threshold:
                        same = {"IfMatch": found.etag} if found.etag else {}
                        answer = s3.get_object(Bucket=self.bucket, Key=found.key, **same)
                        for piece in answer["Body"].iter_chunks(PIECE):
                            out.write(piece)
                    else:
                        s3.download_fileobj(self.bucket, found.key, out, Config=self.managed)
            except Exception as exc:
                raise self.failure(exc, found.key) from None
            info = os.fstat(draft.fd)
        except BaseException:
            draft.abort()
            raise
        try:
            draft.commit(durable=True)
        except OSError as exc:  # a folder is there now
            log.warning("workspace mirror: cannot write %r: %s", relative, exc.strerror)
            return None
        return Synced(info.st_size, info.st_mtime_ns, found.etag)

    def listing(self, prefix: str) -> Iterator[S3File]:
        """Every object whose key starts with `prefix`."""
        try:
            pages = client(self.config).get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    yield S3File(str(entry["Key"]), int(entry["Size"]), str(entry.get("ETag", "")))
        except Exception as exc:
            raise self.failure(exc, prefix) from None

    def delete(self, key: str) -> None:
        try:
            client(self.config).delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise self.failure(exc, key) from None

    def each(
        self, sizes: dict[str, int], move: Callable[[str], Synced | None]
    ) -> tuple[dict[str, Synced], S3Error | None]:
        """`move` each path of `sizes`: small files several at once, then big ones in
        turn. Returns what was moved, and the first failure (the rest still move)."""
        done: dict[str, Synced] = {}
        failure: S3Error | None = None
        small = [path for path, size in sizes.items() if size < self.threshold]
        with ThreadPoolExecutor(WORKERS) as pool:
            futures = {pool.submit(move, path): path for path in small}
            for future in as_completed(futures):
                try:
                    synced = future.result()
                except S3Error as exc:
                    failure = failure or exc
                    continue
                if synced is not None:
                    done[futures[future]] = synced
        for path in sorted(set(sizes) - set(small)):
            try:
                synced = move(path)
            except S3Error as exc:
                failure = failure or exc
                continue
            if synced is not None:
                done[path] = synced
        return done, failure

    def failure(self, exc: Exception, key: str) -> S3Error:
        name = f"s3://{self.bucket}/{key}"
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return S3NoRoom(f"{name} does not fit on this node's disk")
        return translated(exc, self.config, name)
