"""Sharpening of the crop that is pasted last (the swap, or the enhancer's output)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import cv2
import numpy as np

from models.types import ImageBGR

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob


class SharpenStep:
    """composite.sharpen > 0: unsharp masking on the host crop; reports "sharpen" ms. A crop the
    backend already placed in the frame (the device swap under a failed restorer) stays as it is."""

    name = "sharpen"

    def __init__(self) -> None:
        self._blurred: dict[tuple[int, ...], ImageBGR] = {}  # scratch, per crop shape

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        amount = frame.settings.composite.sharpen
        crop = face.crop
        if amount <= 0.0 or crop.placed:
            return
        t0 = time.perf_counter()
        pixels = backend.pixels(crop)
        unsharp_mask(pixels, amount, out=pixels, blurred=self._blur_buffer(pixels))
        frame.add_ms("sharpen", t0)

    def _blur_buffer(self, crop: ImageBGR) -> ImageBGR:
        buf = self._blurred.get(crop.shape)
        if buf is None:
            buf = self._blurred[crop.shape] = np.zeros_like(crop)
        return buf


def unsharp_mask(
    image: ImageBGR,
    amount: float,
    sigma: float = 1.0,
    *,
    out: ImageBGR | None = None,
    blurred: ImageBGR | None = None,
) -> ImageBGR:
    """image + amount * (image - GaussianBlur(image, sigma)), rounded and saturated to uint8.

    `out` may be `image` itself (in place); `blurred` is an optional same-shape scratch buffer.
    """
    dst = np.empty_like(image) if out is None else out
    if amount <= 0.0:
        if dst is not image:
            np.copyto(dst, image)
        return dst
    soft = cv2.GaussianBlur(image, (0, 0), sigma, dst=blurred, borderType=cv2.BORDER_REFLECT_101)
    # addWeighted computes in float and rounds once: (1 + a) * x - a * blur.
    cv2.addWeighted(image, 1.0 + amount, soft, -amount, 0.0, dst=dst)
    return dst


__all__ = ["SharpenStep", "unsharp_mask"]
