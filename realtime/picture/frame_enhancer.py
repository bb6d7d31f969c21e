"""Whole-frame super-resolution after the faces: `FrameEnhanceStage`, one per swap worker.

The picture goes through the frame enhancer (models.wrappers.frame_enhancers: Real-ESRGAN in
overlapping tiles through the model's shared inference service), then:

    keep size (frame_enhancer.upscale = false, the live default): the enhanced picture is scaled
        back to the input's size (an area average) and blended over the picture in place, at
        frame_enhancer.blend: sharper, same size, nothing downstream changes.
    upscale (true; files): the output is the model's factor times the input's size: the enhanced
        picture, blended over the plain picture scaled up (bilinear) at frame_enhancer.blend. The
        engine opened its outputs at that size. This picture is a new array each frame: the frame
        owns it while it waits for the output, so it cannot be one reused buffer.

Reports "frame_enhance" ms. The model's x`scale` buffer and the scaled-back picture are reused.
"""

from __future__ import annotations

import time

import cv2
import numpy as np

from models.types import ImageBGR
from models.wrappers.frame_enhancers import FrameEnhancer
from realtime.core.settings import Settings


class FrameEnhanceStage:
    """A realtime.core.contracts.FrameStage running one worker's frame enhancer (module doc)."""

    def __init__(self, enhancer: FrameEnhancer) -> None:
        self.enhancer = enhancer
        self._big: ImageBGR | None = None
        self._small: ImageBGR | None = None

    def process(self, image: ImageBGR, settings: Settings) -> tuple[ImageBGR, dict[str, float]]:
        wanted = settings.frame_enhancer
        if wanted.model == "none" or (wanted.blend <= 0.0 and not wanted.upscale):
            return image, {}
        t0 = time.perf_counter()
        h, w = int(image.shape[0]), int(image.shape[1])
        self._big = big = self.enhancer.upscale(image, out=self._big)
        blend = float(wanted.blend)
        if wanted.upscale:
            result = np.empty_like(big)
            if blend >= 1.0:
                np.copyto(result, big)
            else:
                plain = cv2.resize(
                    image, (big.shape[1], big.shape[0]), dst=result, interpolation=cv2.INTER_LINEAR
                )
                cv2.addWeighted(big, blend, plain, 1.0 - blend, 0.0, dst=result)
        else:
            small = self._small if self._small is not None and self._small.shape == image.shape else None
            self._small = small = np.asarray(cv2.resize(big, (w, h), dst=small, interpolation=cv2.INTER_AREA))
            cv2.addWeighted(small, blend, image, 1.0 - blend, 0.0, dst=image)
            result = image
        return result, {"frame_enhance": (time.perf_counter() - t0) * 1000.0}


__all__ = ["FrameEnhanceStage"]
