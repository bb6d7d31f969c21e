"""The five-point alignment templates the face models were trained on, and a crop laid out by one.

A template is where the eyes, the nose tip and the mouth corners sit in a model's aligned crop. Each
is stored at the size it is defined for and scaled to the crop size in use (docs/model-contracts.md,
"Alignment templates"):

    arcface_112_v1   the older ArcFace layout (SimSwap, Ghost), defined at 112 px
    arcface_112_v2   ArcFace's own layout (insightface; the recogniser), defined at 112 px
    arcface_128      arcface_112_v2 shifted 8 px right in a 128 px crop: the face sits a little
                     wider (inswapper, HyperSwap, ReSwapper)
    ffhq_512         the FFHQ layout of the face restorers (BlendSwap, UniFace), defined at 512 px
    mtcnn_512        the MTCNN crop layout (HifiFace), published in normalised units
    reswapper_256    arcface_128 at 256 px moved 0.5 px right and down: ReSwapper's own 256 px
                     alignment adds (128 / 32768) * 256 - 0.5 px to both coordinates

A `CropLayout` is a template at one crop size: the matrix taking frame pixels into the crop for
five landmarks, fitted as a similarity (rotation, uniform scale, translation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from models.ops.align import ARCFACE_TEMPLATE_112, FFHQ_TEMPLATE_512, Matrix2x3, Points, similarity_points
from models.types import FloatArray

_ARCFACE_V1_112 = np.array(
    [[39.7300, 51.1380], [72.2700, 51.1380], [56.0000, 68.4930], [42.4630, 87.0100], [69.5370, 87.0100]],
    dtype=np.float32,
)
# Published in units of the crop's side.
_MTCNN_UNIT = np.array(
    [
        [0.36562865, 0.46733799],
        [0.63305391, 0.46585885],
        [0.50019127, 0.61942959],
        [0.39032951, 0.77598822],
        [0.61178945, 0.77476328],
    ],
    dtype=np.float64,
)
_ARCFACE_128 = ARCFACE_TEMPLATE_112 + np.array([8.0, 0.0], dtype=np.float32)
_RESWAPPER_256 = _ARCFACE_128.astype(np.float64) * 2.0 + 0.5


@dataclass(frozen=True, slots=True)
class FaceTemplate:
    """Five points (left eye, right eye, nose tip, left and right mouth corner) in a `defined_at` px
    crop."""

    name: str
    points: tuple[tuple[float, float], ...]
    defined_at: int

    def at(self, size: int) -> FloatArray:
        """The five points in a `size` px crop, (5, 2) float32."""
        pts = np.asarray(self.points, dtype=np.float32)
        if size == self.defined_at:
            return pts
        return np.asarray(pts * np.float32(size / self.defined_at), dtype=np.float32)


def _template(name: str, points: npt.ArrayLike, defined_at: int) -> FaceTemplate:
    pts = np.asarray(points, dtype=np.float64).reshape(5, 2)
    return FaceTemplate(name, tuple((float(x), float(y)) for x, y in pts.tolist()), defined_at)


TEMPLATES: Mapping[str, FaceTemplate] = MappingProxyType(
    {
        t.name: t
        for t in (
            _template("arcface_112_v1", _ARCFACE_V1_112, 112),
            _template("arcface_112_v2", ARCFACE_TEMPLATE_112, 112),
            # float32 like models.ops.align.arcface_template(128): the same matrices bit for bit.
            _template("arcface_128", _ARCFACE_128, 128),
            _template("ffhq_512", FFHQ_TEMPLATE_512, 512),
            _template("mtcnn_512", _MTCNN_UNIT * 512.0, 512),
            _template("reswapper_256", _RESWAPPER_256, 256),
        )
    }
)


def template(name: str) -> FaceTemplate:
    """The template called `name`; ValueError naming the known ones otherwise."""
    found = TEMPLATES.get(name)
    if found is None:
        raise ValueError(f"unknown alignment template {name!r}; known: {', '.join(TEMPLATES)}")
    return found


@dataclass(frozen=True, slots=True)
class CropLayout:
    """A model's aligned crop: `template` scaled to `size` px."""

    template: str
    size: int
    _points: Points = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"crop size must be positive, got {self.size}")
        pts = template(self.template).at(self.size).astype(np.float64).tolist()
        object.__setattr__(self, "_points", tuple((x, y) for x, y in pts))

    @property
    def points(self) -> FloatArray:
        """The template's five points in this crop, (5, 2) float32."""
        return np.asarray(self._points, dtype=np.float32)

    def matrix(self, kps: npt.ArrayLike) -> Matrix2x3:
        """2x3 matrix taking frame pixels into this crop for the face with landmarks `kps`."""
        pts = np.asarray(kps, dtype=np.float64).reshape(5, 2).tolist()
        return similarity_points(pts, self._points)


__all__ = ["TEMPLATES", "CropLayout", "FaceTemplate", "template"]
