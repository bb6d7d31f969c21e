"""The engine's watermark stage: adds the run's mark to a frame's luma, in place.

Marking costs two saturating byte additions over the frame (its + and its - part, built once per
frame size), so a 1080p frame takes well under a millisecond (docs/PERFORMANCE.md). The pattern
is the same on every frame of a run, which codecs keep cheaply and the detector adds up.
"""

from __future__ import annotations

import threading

import cv2
import numpy as np

from models.types import ImageBGR
from realtime.core.watermark.design import AMPLITUDE, DEFAULT_KEY, cell_index, cell_size, chips_for
from realtime.core.watermark.payload import Payload


def mark_pattern(width: int, height: int, payload: Payload, key: str = DEFAULT_KEY) -> np.ndarray:
    """The signed luma offsets (int16, H x W) the mark adds to a frame of this size."""
    tile = chips_for(key).tile(payload.to_bits()).astype(np.int16) * AMPLITUDE
    cell = cell_size(height)
    return tile[cell_index(height, cell)[:, None], cell_index(width, cell)[None, :]]


class Watermarker:
    """Marks frames of any size with one payload. Thread-safe; keeps the planes of the newest size."""

    def __init__(self, payload: Payload, key: str = DEFAULT_KEY) -> None:
        self.payload = payload
        self._key = key
        self._lock = threading.Lock()
        self._planes: tuple[tuple[int, int], np.ndarray, np.ndarray] | None = None

    def _planes_for(self, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            planes = self._planes
            if planes is None or planes[0] != (width, height):
                offsets = mark_pattern(width, height, self.payload, self._key)
                up = np.repeat(np.clip(offsets, 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)
                down = np.repeat(np.clip(-offsets, 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)
                planes = ((width, height), up, down)
                self._planes = planes
            return planes[1], planes[2]

    def mark(self, image: ImageBGR) -> None:
        """Add the mark to `image` (H x W x 3 uint8 BGR), in place."""
        h, w = image.shape[:2]
        up, down = self._planes_for(w, h)
        cv2.add(image, up, dst=image)
        cv2.subtract(image, down, dst=image)
