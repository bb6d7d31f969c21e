"""Crop and swap: the face aligned to the swapper's crop (its template and size), swapped with its
source identity.

In two steps: `SubmitStep` crops every face of the frame and hands it to the swapper's inference
service before any result is read, so the frame's faces (and other streams' faces) share one model
call; `SwapStep` then takes each face's result. A face changing identity is swapped with both
identities and cross-faded between them on the host.
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


class SubmitStep:
    """Crop -> submit the swap (every face, before any is collected); its ms count as "swap"."""

    name = "submit"

    def __init__(self, crop: CropLayout) -> None:
        self.layout = crop

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        t0 = time.perf_counter()
        face.pending = backend.submit(self.layout.matrix(face.target.kps), face.identity, face.previous)
        frame.add_ms("swap", t0)


class SwapStep:
    """The submitted face's swap (-> cross-fade); reports "swap" ms (the model's call included)."""

    name = "swap"

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        t0 = time.perf_counter()
        assert face.pending is not None, "the submit step runs first"
        face.crop, before = backend.collect(face.pending)
        if before is not None:
            pixels = backend.pixels(face.crop)
            cross_fade(backend.pixels(before), pixels, face.target.mix, pixels)
        frame.add_ms("swap", t0)


def cross_fade(old: ImageBGR, new: ImageBGR, mix: float, out: ImageBGR) -> ImageBGR:
    """`mix` of the way from crop `old` to crop `new` (a face changing identity fades from one swap
    to the other instead of popping; a pixel blend moves evenly, where the model's own response
    to a blended identity did not: a quarter of the way moved the face by 1 % on the double)."""
    w = min(max(float(mix), 0.0), 1.0)
    cv2.addWeighted(old, 1.0 - w, new, w, 0.0, dst=out)
    return out


__all__ = ["SubmitStep", "SwapStep", "cross_fade"]
