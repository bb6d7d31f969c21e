"""The enhance step of the per-face chain: each backend restores the face its own way
(realtime.face.host.enhancer on the host, the bound restorer on the device)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from models.errors import ModelOutputError

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob

log = logging.getLogger(__name__)


class EnhanceStep:
    """The frame's enhance stage (if any, at a blend above 0) on the swapped face; its output
    becomes the crop to paste. Reports "enhance", or "enhance.reuse" when a kept correction was
    used. A broken restoration (NaN from an fp16 overflow) is neither pasted nor kept for reuse:
    that face gets the plain swap, and the problem is logged once."""

    name = "enhance"

    def __init__(self) -> None:
        self._said: set[str] = set()

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        stage = frame.enhancer
        settings = frame.settings
        if stage is None or settings.enhancer.blend <= 0.0:  # blend 0: the plain swap
            return
        t0 = time.perf_counter()
        target = face.target
        key = (target.track_id, target.identity) if target.track_id >= 0 else None
        if key is not None:
            frame.keys.append(key)
        try:
            crop, ran = backend.enhance(
                stage,
                face.crop,
                target.kps,
                opacity=settings.composite.opacity * target.weight,
                blend=settings.enhancer.blend,
                every_n=settings.enhancer.every_n,
                key=key,
            )
        except ModelOutputError as exc:
            text = exc.user_message()
            if text not in self._said:
                self._said.add(text)
                log.warning("%s The plain swap is used where that happens.", text)
            return
        face.crop = crop
        frame.add_ms("enhance" if ran else "enhance.reuse", t0)


__all__ = ["EnhanceStep"]
