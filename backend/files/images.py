"""Images: size, mode and format from the header; pixels are never decoded.

Pillow opens lazily, so only the header is read. `MAX_IMAGE_PIXELS` is also
Pillow's decompression-bomb limit for this process: a header claiming more than
twice as many pixels is refused outright.
"""

from __future__ import annotations

from typing import Any

from PIL import Image, UnidentifiedImageError

from backend.files.model import FileMetadata, Source

MAX_IMAGE_PIXELS = 100_000_000
FORMATS = ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP")

# Process-wide by Pillow's design; the server decodes images nowhere else.
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS


def describe_image(source: Source) -> FileMetadata:
    source.handle.seek(0)
    try:
        opened = Image.open(source.handle, formats=FORMATS)
    except UnidentifiedImageError:
        raise ValueError(f"not a {'/'.join(FORMATS)} image Pillow can read") from None
    with opened as image:
        width, height = image.size
        details: dict[str, Any] = {
            "width": width,
            "height": height,
            "mode": image.mode,
            "format": image.format,
            "frames": getattr(image, "n_frames", 1),
        }
    if width * height > MAX_IMAGE_PIXELS:
        details["warning"] = f"over {MAX_IMAGE_PIXELS:,} pixels: too large to decode here"
    frames = f", {details['frames']} frames" if details["frames"] > 1 else ""
    return source.describe(
        "image", f"{image.format} image, {width}×{height} px, {image.mode}{frames}", details
    )
