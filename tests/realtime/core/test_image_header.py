"""Picture sizes from file headers, read before decoding: every format OpenCV reads here, and a real
40000x40000 PNG refused without the gigabytes its decoding would take."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from realtime.core.errors import ImageTooLargeError
from realtime.core.image_header import MAX_IMAGE_PIXELS, check_pixel_count, picture_size
from realtime.face.source_face import read_image
from realtime.io.sources import load_image


def huge_png(path: Path, width: int = 40000, height: int = 40000) -> Path:
    """A valid 1-bit greyscale PNG, all black: about 200 kB on disk for 1.6 gigapixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte "none", then the packed bits
    packer = zlib.compressobj(9)
    block = row * 1000
    body = b"".join(packer.compress(block) for _ in range(height // 1000)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


@pytest.mark.parametrize(
    ("ext", "params"),
    [
        (".png", []),
        (".jpg", []),
        (".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        (".bmp", []),
        (".webp", [cv2.IMWRITE_WEBP_QUALITY, 80]),
        (".webp", [cv2.IMWRITE_WEBP_QUALITY, 101]),  # lossless: VP8L
        (".tif", []),
        (".ppm", []),
        (".pgm", []),
        (".jp2", []),
    ],
)
def test_every_format_opencv_writes_has_its_size_read_from_the_header(ext: str, params: list[int]) -> None:
    image = np.zeros((37, 53, 1 if ext == ".pgm" else 3), np.uint8)
    ok, buf = cv2.imencode(ext, image, params)
    assert ok
    found = picture_size(buf.tobytes())
    assert found is not None and found[1:] == (53, 37), (ext, found)


def test_unknown_or_cut_short_headers_leave_it_to_the_decoder() -> None:
    assert picture_size(b"") is None
    assert picture_size(b"not a picture at all") is None
    assert picture_size(b"\x89PNG\r\n\x1a\n\x00\x00") is None
    assert picture_size(b"\xff\xd8\xff\xe0\x00\x10JFIF") is None


def test_the_limit_is_a_pixel_count() -> None:
    _, buf = cv2.imencode(".png", np.zeros((100, 100, 3), np.uint8))
    check_pixel_count(Path("x.png"), buf.tobytes(), "Image", limit=10_000)
    with pytest.raises(ImageTooLargeError, match="100x100 pixels") as info:
        check_pixel_count(Path("x.png"), buf.tobytes(), "Image", limit=9_999)
    assert info.value.exit_code == 9


def test_a_real_40000x40000_png_is_refused_before_decoding(tmp_path: Path) -> None:
    path = huge_png(tmp_path / "huge.png")
    assert path.stat().st_size < 2_000_000
    with pytest.raises(ImageTooLargeError) as info:
        load_image(path)
    message = info.value.user_message()
    assert "40000x40000 pixels" in message and f"{MAX_IMAGE_PIXELS / 1e6:.0f} MP" in message
    with pytest.raises(ImageTooLargeError, match=r"Reference photo .* 40000x40000"):
        read_image(path, "reference")
