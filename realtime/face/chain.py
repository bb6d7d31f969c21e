"""The per-face chain: one list of steps, each written once against realtime.face.backend.FaceBackend.

First, for every face of the frame: crop and submit the swap (steps/swap.py, SubmitStep), so the
faces share one model call. Then per face: its swap (SwapStep) -> masks (steps/masks.py) -> colour
match (steps/colour.py) -> [Poisson blend] (steps/blend.py) -> [enhance in FFHQ space]
(steps/enhance.py) -> sharpen (steps/sharpen.py) -> one region-limited paste (steps/paste.py).
Each step that runs reports its own ms ("swap", "mask.occlusion", "mask.regions", "mask.mouth",
"colour", "blend", "enhance" / "enhance.reuse", "sharpen", "paste"), summed over the frame's
faces. A step reads the frame's settings from `FrameJob` and hands its result on in `FaceJob`;
nothing calls back into the worker.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from models.types import ImageBGR
from realtime.core.contracts import SwapTarget
from realtime.core.settings import MasksSettings, Settings
from realtime.face.backend import FaceBackend, FaceCrop, PendingSwap
from realtime.face.host.compositor import Compositor, MaskArray

if TYPE_CHECKING:
    from realtime.face.host.enhancer import FaceEnhanceStage


@dataclass(slots=True)
class FrameJob:
    """What every step of one frame shares.

    image: the host frame (read by the mask models and the enhancer, swapped in place); masks:
    the masks this worker can run now; enhancer: the enhance stage in use, if any; keys: the
    faces whose kept enhancer corrections stay (filled by the enhance step).
    """

    image: ImageBGR
    settings: Settings
    masks: MasksSettings
    compositor: Compositor
    enhancer: FaceEnhanceStage | None
    timings: dict[str, float]
    keys: list[Hashable] = field(default_factory=list)

    def add_ms(self, key: str, t0: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + (time.perf_counter() - t0) * 1000.0


@dataclass(slots=True)
class FaceJob:
    """One face going through the chain.

    identity / previous: indices of the source latents (checked); pending: its submitted swap;
    crop: what is pasted in the end (the swap, then the enhancer's output); skin: the colour
    match's measurement weights.
    """

    target: SwapTarget
    identity: int
    previous: int | None
    pending: PendingSwap | None = None
    crop: FaceCrop = field(init=False)
    skin: MaskArray | None = None


class FaceStep(Protocol):
    """One step of the chain. `name` identifies it (e.g. to insert a step before another)."""

    name: str

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None: ...


def run_chain(
    first: tuple[FaceStep, ...],
    steps: tuple[FaceStep, ...],
    backend: FaceBackend,
    faces: list[FaceJob],
    frame: FrameJob,
    after: Sequence[tuple[FaceStep, FaceJob]] = (),
) -> None:
    """Each of `first` over every face (submitting their model calls together), then every face
    through every step, then each of `after` (a step on a face: the privacy covers, over the
    swaps), then the frame finished by the backend."""
    with backend.submitting():
        for step in first:
            for face in faces:
                step.run(backend, face, frame)
    for face in faces:
        for step in steps:
            step.run(backend, face, frame)
    for step, face in after:
        step.run(backend, face, frame)
    backend.end(frame.keys, frame.enhancer)


__all__ = ["FaceJob", "FaceStep", "FrameJob", "run_chain"]
