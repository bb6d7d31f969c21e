"""Synthetic media for tests: frames stamped with their number, and small videos made from them.

The number is drawn as a row of large black/white blocks, which survives lossy encoding, so a test
can check the order of decoded frames and not only their count.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from models.types import ImageBGR

BLOCK = 8  # pixels per bit, both ways
BITS = 10  # numbers 0..1023
MIN_WIDTH = BLOCK * BITS


def stamp_frame_number(image: ImageBGR, number: int) -> None:
    """Draws `number` in binary (most significant bit first) along the top-left of `image`."""
    if not 0 <= number < 2**BITS:
        raise ValueError(f"frame number {number} does not fit in {BITS} bits")
    for bit in range(BITS):
        on = (number >> (BITS - 1 - bit)) & 1
        image[:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 255 if on else 0


def read_frame_number(image: ImageBGR) -> int:
    """Inverse of stamp_frame_number, reading each block's centre so blurred edges do not matter."""
    number = 0
    lo, hi = BLOCK // 4, BLOCK - BLOCK // 4
    for bit in range(BITS):
        block = image[lo:hi, bit * BLOCK + lo : bit * BLOCK + hi]
        number = (number << 1) | int(block.mean() > 127)
    return number


def synthetic_frame(number: int, size: tuple[int, int] = (96, 64)) -> ImageBGR:
    """A (h, w, 3) frame: mid-grey with a blue tint that changes per frame, and its number stamped."""
    width, height = size
    if width < MIN_WIDTH:
        raise ValueError(f"width must be at least {MIN_WIDTH} to hold the frame number")
    image = np.full((height, width, 3), 128, np.uint8)
    image[BLOCK:, :, 0] = (number * 37) % 256
    stamp_frame_number(image, number)
    return image


def make_test_video(
    path: str | Path,
    frames: int = 30,
    size: tuple[int, int] = (96, 64),
    fps: float = 25.0,
    codec: str | None = None,
    *,
    rotation: int = 0,
    gop: int | None = None,
) -> Path:
    """Writes `frames` synthetic frames (numbered 0..frames-1) to `path` with PyAV; returns the path.

    codec: libx264 when this PyAV build has it, else mpeg4, unless given. rotation: a display
    rotation tag (degrees counterclockwise, as phones tag portrait video). gop: keyframe interval.
    """
    images = [synthetic_frame(n, size) for n in range(frames)]
    return write_video(path, images, fps, codec, rotation=rotation, gop=gop)


def write_video(
    path: str | Path,
    images: Sequence[ImageBGR],
    fps: float = 25.0,
    codec: str | None = None,
    *,
    rotation: int = 0,
    gop: int | None = None,
) -> Path:
    """Encode BGR images (all the same size) into a video file at high quality."""
    path = Path(path)
    size = (int(images[0].shape[1]), int(images[0].shape[0]))
    if codec is None:
        try:
            av.Codec("libx264", "w")
            codec = "libx264"
        except ValueError:
            codec = "mpeg4"
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        if codec == "libx264":
            stream.options = {"crf": "18", "preset": "ultrafast"}
        else:
            stream.bit_rate = 2_000_000
        if gop is not None and codec == "libx264":
            stream.options = {**stream.options, "g": str(gop), "keyint_min": str(gop), "sc_threshold": "0"}
        elif gop is not None:
            stream.codec_context.gop_size = gop
        if rotation:
            stream.set_display_rotation(rotation)
        for number, image in enumerate(images):
            av_frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            av_frame.pts = number
            container.mux(stream.encode(av_frame))
        container.mux(stream.encode(None))
    return path


def make_audio_only_file(path: str | Path) -> Path:
    """An .m4a with one AAC frame of silence and no video stream."""
    path = Path(path)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("aac", rate=44100)
        assert isinstance(stream, av.AudioStream)
        audio = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        audio.sample_rate = 44100
        audio.pts = 0
        container.mux(stream.encode(audio))
        container.mux(stream.encode(None))
    return path
