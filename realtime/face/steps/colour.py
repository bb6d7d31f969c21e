"""Colour match: the swapped face takes the colour statistics of the frame's own face.

`ColourStep` runs it in the per-face chain on either backend: on the host crop of the swap (a
device crop is fetched for it) against the frame's own face under the same crop.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from realtime.face.host.colour import colour_transfer

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob


class ColourStep:
    """composite.colour_match: reports "colour" ms."""

    name = "colour"

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        if not frame.settings.composite.colour_match:
            return
        t0 = time.perf_counter()
        crop = face.crop
        pixels = backend.pixels(crop)
        np.copyto(pixels, colour_transfer(pixels, backend.reference(crop), face.skin))
        frame.add_ms("colour", t0)


__all__ = ["ColourStep"]
