"""The privacy fallback: what a face that should be swapped shows while it is not (yet) swapped.

While a locked or mapped person is missing, a face found where they might be is not swapped until
the recogniser confirms them, and a swap fades in over a few frames: in both cases the person's own
face shows. `privacy.fallback` chooses what is shown instead:

* "original": the face as it is (no cover);
* "blur": the face pixelated (coarse blocks of its own colours: no identity survives);
* "hold": the last identity swapped onto a face found where the missing person was, for up to
  `privacy.hold_frames`, then the pixelation.

The analysis decides which faces are covered and why (`Cover`, carried on `PrivacyPlan`); the
swap worker pastes each cover with `CoverStep`, written once against the chain's backend, after the
frame's swaps (a cover over a fading-in swap hides the original under it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import cv2
import numpy as np

from models.ops.templates import CropLayout
from models.types import FloatArray, ImageBGR
from realtime.core.contracts import FramePlan
from realtime.face.backend import FaceCrop

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob

CoverReason = Literal["not confirmed yet", "fading in", "held"]
BLOCKS = 8  # the pixelation's blocks across the face crop


@dataclass(frozen=True, slots=True)
class Cover:
    """One face to cover this frame: its landmarks, how much of the cover shows (0..1) and why."""

    kps: FloatArray
    track_id: int
    reason: CoverReason
    strength: float = 1.0


@dataclass(slots=True)
class PrivacyPlan(FramePlan):
    """A frame plan with the faces in fallback."""

    covers: list[Cover] = field(default_factory=list)

    def fallbacks(self) -> tuple[str, ...]:
        return tuple(c.reason for c in self.covers if c.strength > 0.0)


def covers_of(plan: FramePlan) -> list[Cover]:
    return plan.covers if isinstance(plan, PrivacyPlan) else []


def pixelate(crop: ImageBGR, blocks: int = BLOCKS) -> ImageBGR:
    """`crop` as `blocks` x `blocks` flat squares of its own average colours."""
    h, w = crop.shape[:2]
    small = cv2.resize(crop, (blocks, blocks), interpolation=cv2.INTER_AREA)
    return np.asarray(cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST), dtype=np.uint8)


class CoverStep:
    """Pixelates a covered face through its paste mask; reports "cover" ms."""

    name = "cover"

    def __init__(self, crop: CropLayout) -> None:
        self.layout = crop
        self.crop_size = crop.size

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        t0 = time.perf_counter()
        m = self.layout.matrix(face.target.kps)
        crop = FaceCrop(m)
        crop.host = pixelate(backend.reference(crop))
        crop.mask = frame.compositor.crop_mask(self.crop_size, m)
        backend.paste(crop, face.target.weight)
        frame.add_ms("cover", t0)


__all__ = ["BLOCKS", "Cover", "CoverReason", "CoverStep", "PrivacyPlan", "covers_of", "pixelate"]
