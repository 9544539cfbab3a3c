"""The headers of a file download: its name, and nothing a browser would run."""

from __future__ import annotations

from urllib.parse import quote


def download_headers(filename: str, disposition: str = "attachment") -> dict[str, str]:
    """RFC 6266: an ASCII name for old clients, the real one percent-encoded; a browser
    that opens the file anyway runs it sandboxed, and never sniffs its type."""
    fallback = filename.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return {
        "Content-Disposition": f'{disposition}; filename="{fallback}"; '
        f"filename*=UTF-8''{quote(filename, safe='')}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    }
