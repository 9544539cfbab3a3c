"""Images: header facts only; decompression bombs refused."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from tests.files.helpers import describe, png_claiming


def test_png_and_jpeg_headers(tmp_path: Path) -> None:
    Image.new("RGBA", (64, 32)).save(tmp_path / "logo.png")
    Image.new("RGB", (10, 20)).save(tmp_path / "photo.jpg")
    png = describe(tmp_path / "logo.png")
    assert (png.kind, png.error) == ("image", None)
    assert {k: png.details[k] for k in ("width", "height", "mode", "format")} == {
        "width": 64,
        "height": 32,
        "mode": "RGBA",
        "format": "PNG",
    }
    assert describe(tmp_path / "photo.jpg").summary == "JPEG image, 10×20 px, RGB"


def test_a_decompression_bomb_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(png_claiming(100_000, 100_000))
    error = describe(path).error
    assert error is not None and "decompression bomb" in error.lower()


def test_a_damaged_image_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))
    assert describe(path).error is not None
