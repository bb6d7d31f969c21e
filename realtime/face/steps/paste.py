"""The one region-limited paste of each face's final crop (see steps/compositor.py for the host's)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob


class PasteStep:
    """Pastes at composite.opacity x the face's weight; reports "paste" ms. A crop the backend
    already placed (the device swap under a failed restorer) is not pasted twice."""

    name = "paste"

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        if face.crop.placed:
            return
        t0 = time.perf_counter()
        backend.paste(face.crop, frame.settings.composite.opacity * face.target.weight)
        frame.add_ms("paste", t0)


__all__ = ["PasteStep"]
