"""The tracker's per-track state and one frame's flow result for a track."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.types import FloatArray
from realtime.face.one_euro import OneEuroFilter

Affine = npt.NDArray[np.float64]  # 2x3
GreyImage = npt.NDArray[np.uint8]  # the small grey copy of a frame the flow runs on


@dataclass(slots=True)
class FlowResult:
    ok: bool
    kps: FloatArray  # full-frame pixels
    quality: float
    corners: FloatArray  # surviving corners, small-image pixels, (N, 2)
    motion: Affine | None  # fitted similarity from the previous frame, full-frame pixels


@dataclass(slots=True)
class Track:
    track_id: int
    raw_kps: FloatArray  # last measurement (detector or flow), full-frame pixels
    rel_box: npt.NDArray[np.float64]  # detector box in landmark units: (box - centre) / spread
    score: float
    filter: OneEuroFilter
    corners: FloatArray  # extra flow points, small-image pixels, (N, 2)
    velocity: npt.NDArray[np.float64]  # landmark centre motion, px/frame, for coasting when lost
    motion: Affine | None = None  # how the face moved since the last frame, when known
    quality: float = 1.0
    swap_weight: float = 0.0
    missed: int = 0
    detected: bool = True
    # False once the track has coasted (its flow failed or was not believed): flow that "works"
    # from a coasted position only proves the background there is still, not that a face is.
    # Only a detection brings a broken track back.
    flow_chain: bool = True
    reacquired: bool = False  # this frame's detection continued it across a break (TrackedFace)
    # Another face's head is over this one and moves another way: its edge may drag this face's
    # flow, so the speed is learned only from flow a detection confirms (see _mark_crowded).
    crowded: bool = False
    # Where a face hidden behind someone was last believed to be (a detection or flow that held)
    # when it began to coast: a re-find is looked for anywhere between there and the coasted
    # position. None when the track is not coasting, or did not coast from behind someone.
    seen_kps: FloatArray | None = None


__all__ = ["Affine", "FlowResult", "GreyImage", "Track"]
