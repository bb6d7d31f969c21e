"""Plain records exchanged between the model wrappers and the engine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
ImageBGR = npt.NDArray[np.uint8]  # (H, W, 3) uint8, OpenCV channel order


@dataclass(frozen=True, slots=True)
class Detection:
    """One detected face in frame pixel coordinates.

    box: (4,) float32 x1, y1, x2, y2.
    kps: (5, 2) float32: left eye, right eye, nose tip, left mouth corner, right mouth corner
         ("left" as seen in the image, i.e. smaller x for a frontal face).
    score: detector confidence in [0, 1].
    """

    box: FloatArray
    kps: FloatArray
    score: float

    @property
    def area(self) -> float:
        w = float(self.box[2] - self.box[0])
        h = float(self.box[3] - self.box[1])
        return max(w, 0.0) * max(h, 0.0)


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle of frame pixels, [y0:y1, x0:x1] (integer bounds, end exclusive)."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def empty(self) -> bool:
        return self.x1 <= self.x0 or self.y1 <= self.y0

    def intersect(self, other: Box) -> Box:
        """The part of this rectangle inside `other` (possibly empty)."""
        return Box(
            max(self.x0, other.x0), max(self.y0, other.y0), min(self.x1, other.x1), min(self.y1, other.y1)
        )


@dataclass(frozen=True, slots=True)
class SourceFace:
    """What a face swapper takes its identity from (each family reads what it needs).

    embedding: (512,) float32, the L2-normalised average of the source photos' normalised ArcFace
    embeddings. raw_embedding: (512,) float32, the average of their raw ArcFace outputs (what the
    embedding converters take), or None where no ArcFace ran. image / kps: the first photo around its
    face and the face's five landmarks in it (the families that take a source picture), or None.
    """

    embedding: FloatArray
    raw_embedding: FloatArray | None = None
    image: ImageBGR | None = None
    kps: FloatArray | None = None
