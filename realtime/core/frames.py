"""Typed records that travel through the engine: timestamps travel with the frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from models.types import ImageBGR
from realtime.core.errors import SourceError


@dataclass(slots=True)
class VideoFrame:
    """One picture on its way from a source to a sink.

    image: (H, W, 3) uint8 BGR, owned by the frame (sources never hand out a buffer they reuse).
    index: the source's frame number, counting from 0 (used to restore order before the sink).
    capture_ts: time.perf_counter() when the frame was captured or decoded; the sink measures
        glass-to-glass latency from it.
    pts: position in the media timeline in seconds (video files), or None for live sources.
    prepared: what the analyser made ahead for this picture on the capture thread (see
        realtime.core.contracts.PreparingAnalyser), or None.
    marked: the picture carries the run's watermark already (a GPU worker added it before its
        download); the sink marks every other frame.
    """

    image: ImageBGR
    index: int
    capture_ts: float
    pts: float | None = None
    prepared: object | None = None
    marked: bool = False

    @property
    def device_picture(self) -> object | None:
        """The same picture still on the GPU (NVDEC sources), or None for a host-only frame."""
        return None

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def height(self) -> int:
        return int(self.image.shape[0])


def processing_shape(width: int, height: int, longest: int) -> tuple[int, int]:
    """(width, height) with the longer side at most `longest` px (0 = no limit), aspect kept;
    never larger than the input."""
    if longest <= 0 or max(width, height) <= longest:
        return width, height
    scale = longest / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def fit_processing_size(frame: VideoFrame, longest: int) -> VideoFrame:
    """Scale the frame's picture down so the face stages see at most `longest` px on the longer side
    (`pipeline.processing_size`); the sinks scale it back to their output size. The frame itself is
    updated and returned; a frame that already fits is left as it is."""
    # width/height, not image.shape: an NVDEC frame knows its size without downloading its picture.
    w, h = frame.width, frame.height
    new_w, new_h = processing_shape(w, h, longest)
    if (new_w, new_h) == (w, h):
        return frame
    image = frame.image
    # Halve while 2x or more too large, then one bilinear step. A bilinear halving averages each
    # 2x2 block (a box filter, no aliasing) at memory speed; OpenCV's area filter does the same for
    # integer factors but is several times slower for a non-integer one (1280 -> 960, 1080p -> 720p;
    # docs/PERFORMANCE.md).
    while image.shape[1] >= 2 * new_w and image.shape[0] >= 2 * new_h:
        half = (image.shape[1] // 2, image.shape[0] // 2)
        image = np.asarray(cv2.resize(image, half, interpolation=cv2.INTER_LINEAR))
    if (image.shape[1], image.shape[0]) != (new_w, new_h):
        image = np.asarray(cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR))
    frame.image = image
    return frame


def to_bgr8(image: Any) -> ImageBGR:
    """A picture as the face stages need it: (H, W, 3) uint8 BGR, C-contiguous. Grey (one channel)
    and BGRA pictures are converted, 16-bit ones scaled to 8 bits (an infrared camera's Y16), views
    (mirrored, channels reversed) and read-only pictures copied; anything else is a SourceError
    naming what came."""
    if not isinstance(image, np.ndarray) or image.ndim not in (2, 3) or image.size == 0:
        what = f"an array of shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        raise SourceError(f"The input gave {what} instead of a picture.")
    if image.dtype.kind == "u" and image.dtype.itemsize == 2:
        # Any byte order; rounds, 65535 -> 255.
        image = cv2.convertScaleAbs(image.astype(np.uint16, copy=False), alpha=1.0 / 257.0)
    elif image.dtype.kind != "u" or image.dtype.itemsize != 1:
        raise SourceError(f"The input gave {image.dtype} pictures; FaceCast takes 8-bit or 16-bit ones.")
    channels = 1 if image.ndim == 2 else int(image.shape[2])
    if channels == 1:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_GRAY2BGR), dtype=np.uint8)
    if channels == 4:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGRA2BGR), dtype=np.uint8)
    if channels != 3:
        raise SourceError(f"The input gave pictures with {channels} channels; FaceCast takes 1, 3 or 4.")
    if not image.flags.writeable:
        return image.copy()  # the swap draws into the frame
    return np.ascontiguousarray(image)


def conform_picture(frame: VideoFrame) -> VideoFrame:
    """The frame with its host picture made what the engine needs (see to_bgr8); a frame that
    already is one (every built-in source's) is returned untouched, at the cost of a few checks.
    A picture still on the GPU is left there."""
    if frame.device_picture is not None:
        return frame
    image = frame.image
    if (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim == 3
        and image.shape[2] == 3
        and image.flags.c_contiguous
        and image.flags.writeable
    ):
        return frame
    frame.image = to_bgr8(image)
    return frame
