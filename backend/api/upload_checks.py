"""What a file must be to be stored in a workspace, and how a refused one reads.

The same for every way in: a form upload, a streamed or tus upload, OpenAI's Files and
Containers APIs, the `code_interpreter` tool's container. Here an `UnsafePath` is a bad
file name (400) or a folder that cannot be used (409), not the bad path of a request that
names a file (errors.py).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from backend.api.bodies import UploadQuota, no_room
from backend.api.errors import ApiError
from backend.core.user_files import UserFiles
from backend.storage.workspaces import (
    SUPPORTED_EXTENSIONS,
    FileTooLarge,
    NotARegularFile,
    UnsafePath,
    safe_filename,
)


def checked_name(name: str) -> str:
    """The upload's extension; a 400 or 415 for a name we would not store."""
    try:
        safe_filename(name)
    except UnsafePath:
        raise ApiError(
            400, f"Invalid file name {name!r}: use a plain name.", code="bad_name"
        ) from None
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if extension not in SUPPORTED_EXTENSIONS:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise ApiError(415, f"Unsupported file type '.{extension}'. Supported: {supported}.")
    return extension


async def check_room(
    quota: UploadQuota, files: UserFiles, user_id: int, file_ids: list[str]
) -> None:
    """A 404 for a file the user does not have (`UserFileNotFound`), a 507 if copies of
    them would not fit the user's disk quota."""
    await quota.check(sum(files.get(user_id, file_id).bytes for file_id in file_ids))


@contextlib.contextmanager
def stored_file_errors(limit_mb: float | None = None) -> Iterator[None]:
    """A file refused where it is being stored (Files API, a container's workspace): a
    413 past the form upload's size, a 409 for an unusable folder, a 507 for a full disk."""
    try:
        yield
    except FileTooLarge:
        size = f"{limit_mb:g} MB" if limit_mb is not None else "an upload may be"
        raise ApiError(
            413,
            f"The file is larger than {size} (PYTHON_CODE_MAX_FILE_SIZE).",
            code="file_too_large",
        ) from None
    except (UnsafePath, NotARegularFile, NotADirectoryError):
        raise unusable() from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_room(0) from None
        raise


def too_large(limit_mb: float) -> ApiError:
    return ApiError(
        413, f"The file is larger than {limit_mb:g} MB (MAX_UPLOAD_SIZE_MB).", code="file_too_large"
    )


def unusable() -> ApiError:
    return ApiError(409, "The session's uploads folder is not usable.", code="bad_workspace")
