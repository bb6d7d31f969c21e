"""A picture's size from its file header, read before anything is decoded.

A small file can hold a huge picture (a 40000x40000 PNG of one colour is under 2 MB; OpenCV would
allocate 4.8 GB to decode it), so every image read checks the header first. Covers the formats
OpenCV reads here: PNG, JPEG, BMP, WebP, TIFF, PNM and JPEG 2000.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from realtime.core.errors import ImageTooLargeError

MAX_IMAGE_PIXELS = 100_000_000  # 100 MP: four times an 8K frame, far above any camera photo


def picture_size(data: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) from the header bytes, or None when the format is not recognised
    (or the header is cut short): OpenCV then decides, under its own limit."""
    for reader in (_png, _jpeg, _bmp, _webp, _tiff, _pnm, _jpeg2000):
        found = reader(data)
        if found is not None:
            return found
    return None


def check_pixel_count(path: Path, data: bytes, what: str, limit: int = MAX_IMAGE_PIXELS) -> None:
    """Raise ImageTooLargeError when the header says the picture has more than `limit` pixels."""
    found = picture_size(data)
    if found is None:
        return
    kind, width, height = found
    if width * height > limit:
        raise ImageTooLargeError(
            f"{what} {path} is {width}x{height} pixels ({width * height / 1e6:,.0f} MP, {kind.upper()}); "
            f"FaceCast reads pictures of up to {limit / 1e6:.0f} MP.",
            hint="Scale it down (e.g. to 4000 px on the longer side) and use that.",
        )


def _png(data: bytes) -> tuple[str, int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "png", int(width), int(height)
    return None


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            pos += 1
            continue
        marker = data[pos + 1]
        if marker in (0xD8, 0x01, 0xFF) or 0xD0 <= marker <= 0xD7:
            pos += 1 if marker == 0xFF else 2  # fill bytes, then markers without a length
            continue
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        # Start-of-frame markers (baseline, progressive, ...) carry the size; C4/C8/CC do not.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and pos + 9 <= len(data):
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return "jpeg", int(width), int(height)
        pos += 2 + length
    return None


def _bmp(data: bytes) -> tuple[str, int, int] | None:
    if data[:2] != b"BM" or len(data) < 26:
        return None
    (header_size,) = struct.unpack("<I", data[14:18])
    if header_size == 12:  # BITMAPCOREHEADER: 16-bit sides
        width, height = struct.unpack("<HH", data[18:22])
    else:
        width, height = struct.unpack("<ii", data[18:26])  # a negative height: stored top-down
    return "bmp", abs(int(width)), abs(int(height))


def _webp(data: bytes) -> tuple[str, int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return "webp", width, height
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return "webp", width & 0x3FFF, height & 0x3FFF
    return None


def _tiff(data: bytes) -> tuple[str, int, int] | None:
    order = {b"II*\x00": "<", b"MM\x00*": ">"}.get(data[:4])
    if order is None or len(data) < 8:
        return None
    (offset,) = struct.unpack(order + "I", data[4:8])
    if offset + 2 > len(data):
        return None
    (count,) = struct.unpack(order + "H", data[offset : offset + 2])
    sides: dict[int, int] = {}
    for n in range(count):
        entry = data[offset + 2 + 12 * n : offset + 14 + 12 * n]
        if len(entry) < 12:
            break
        tag, kind = struct.unpack(order + "HH", entry[:4])
        if tag in (256, 257):  # ImageWidth, ImageLength: SHORT or LONG
            fmt = "H" if kind == 3 else "I"
            sides[tag] = int(struct.unpack(order + fmt, entry[8 : 8 + struct.calcsize(fmt)])[0])
    if 256 in sides and 257 in sides:
        return "tiff", sides[256], sides[257]
    return None


_PNM = re.compile(rb"P[1-7](?:\s+|#[^\n]*\n)+(\d+)(?:\s+|#[^\n]*\n)+(\d+)")


def _pnm(data: bytes) -> tuple[str, int, int] | None:
    match = _PNM.match(data[:512])
    if match is None:
        return None
    return "pnm", int(match.group(1)), int(match.group(2))


def _jpeg2000(data: bytes) -> tuple[str, int, int] | None:
    if data[:4] == b"\xff\x4f\xff\x51" and len(data) >= 24:  # a bare codestream: the SIZ segment
        width, height, x0, y0 = struct.unpack(">IIII", data[8:24])
        return "jpeg 2000", int(width - x0), int(height - y0)
    if data[4:12] == b"jP  \r\n\x87\n":
        at = data.find(b"ihdr", 0, 4096)
        if at >= 0 and at + 12 <= len(data):
            height, width = struct.unpack(">II", data[at + 4 : at + 12])
            return "jpeg 2000", int(width), int(height)
    return None
