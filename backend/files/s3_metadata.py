"""An S3 object's metadata from ranged reads, never a whole download.

`RangedObject` is a read-only, seekable file whose reads are HTTP range
requests, so every format reader works on it unchanged: a CSV's first
megabyte, a Parquet footer (and a few rows of its first row group), a
spreadsheet's zip directory. It stops after `MAX_READ_BYTES`, so a reader that
would scan the object fails instead of downloading it. `describe_object` runs in
the isolated helper process, like every parser of untrusted files.
"""

from __future__ import annotations

import io
from typing import Any

from backend.files.model import FileMetadata
from backend.storage.s3_objects import S3Config, S3Object, client, translated

BLOCK = 1024 * 1024  # bytes per range request
MAX_READ_BYTES = 64 * 1024 * 1024


class RangedObject(io.RawIOBase):
    def __init__(self, config: S3Config, found: S3Object) -> None:
        self.config = config
        self.found = found
        self.position = 0
        self.fetched = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.found.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self.found.size - self.position)
        if wanted <= 0:
            return 0
        if self.fetched + wanted > MAX_READ_BYTES:
            raise OSError(f"reading its metadata would take more than {MAX_READ_BYTES} bytes")
        location = self.found.location
        try:
            same = {"IfMatch": self.found.etag} if self.found.etag else {}
            answer = client(self.config).get_object(
                Bucket=location.bucket,
                Key=location.key,
                Range=f"bytes={self.position}-{self.position + wanted - 1}",
                **same,
            )
            data = answer["Body"].read()
        except Exception as exc:
            raise translated(exc, self.config, location.name) from None
        buffer[: len(data)] = data
        self.position += len(data)
        self.fetched += len(data)
        return len(data)


def describe_object(config: S3Config, found: S3Object) -> FileMetadata:
    """In the isolated helper: the object's metadata, named by its `s3://` name."""
    from backend.files.metadata import extract_file_metadata  # the readers: the helper's only

    raw = RangedObject(config, found)
    with io.BufferedReader(raw, buffer_size=BLOCK) as handle:
        metadata = extract_file_metadata(found.location.name, handle, found.size)
    metadata.details["etag"] = found.etag
    return metadata
