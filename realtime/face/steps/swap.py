"""Crop and swap: the face aligned to the swapper's crop (its template and size), swapped with its
source identity.

A face changing identity is swapped with both identities and cross-faded between them on the host.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import cv2

from models.ops.templates import CropLayout
from models.types import ImageBGR

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob


class SwapStep:
    """Crop -> swap (-> cross-fade); reports "swap" ms (the crop included)."""

    name = "swap"

    def __init__(self, crop: CropLayout) -> None:
        self.layout = crop

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        t0 = time.perf_counter()
        target = face.target
        backend.crop(self.layout.matrix(target.kps))
        if face.previous is not None:
            before = backend.swap(face.previous, spare=True)
            face.crop = backend.swap(face.identity)
            pixels = backend.pixels(face.crop)
            cross_fade(backend.pixels(before), pixels, target.mix, pixels)
        else:
            face.crop = backend.swap(face.identity)
        frame.add_ms("swap", t0)


def cross_fade(old: ImageBGR, new: ImageBGR, mix: float, out: ImageBGR) -> ImageBGR:
    """`mix` of the way from crop `old` to crop `new` (a face changing identity fades from one swap
    to the other instead of popping; a pixel blend moves evenly, where the model's own response
    to a blended identity did not: a quarter of the way moved the face by 1 % on the double)."""
    w = min(max(float(mix), 0.0), 1.0)
    cv2.addWeighted(old, 1.0 - w, new, w, 0.0, dst=out)
    return out


__all__ = ["SwapStep", "cross_fade"]
