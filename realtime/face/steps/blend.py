"""Poisson blending (composite.blend = "poisson"): the swapped face carried into the frame's
lighting in the gradient domain before it is pasted (realtime.face.host.poisson).

`BlendStep` runs after the colour match and before the enhancer, on the swap's crop, on either
backend: the host crop is edited in place; a device crop is fetched to the host for it and goes
back as the paste's input, like the colour match's (one crop down, one up, both counted in the
device backend's copies). The feathered paste that follows is unchanged: the blend makes the
crop meet the frame where the feather mixes the two.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from realtime.face.host.poisson import PoissonBlender

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob


class BlendStep:
    """composite.blend = "poisson": reports "blend" ms. One per worker (the blender keeps the
    factorisations of the masks it has met)."""

    name = "blend"

    def __init__(self, blender: PoissonBlender | None = None) -> None:
        self.blender = blender or PoissonBlender()

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        if frame.settings.composite.blend != "poisson":
            return
        crop = face.crop
        assert crop.mask is not None, "the mask step runs before the blend"
        t0 = time.perf_counter()
        pixels = backend.pixels(crop)
        self.blender.blend(pixels, backend.reference(crop), crop.mask, out=pixels)
        frame.add_ms("blend", t0)


__all__ = ["BlendStep"]
