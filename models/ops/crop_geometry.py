"""Aligned crops as the device graphs take them: the crop's spec (size and fused preprocessing) and
the geometry of which frame pixels a crop reads and a paste touches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, invert_affine
from models.types import Box


@dataclass(frozen=True, slots=True)
class CropSpec:
    """An aligned crop and the model preprocessing fused into its graph: out = crop * scale + offset,
    channels BGR as in the frame or RGB, float32 (or float16 for fp16-I/O models: GridSample itself
    stays float32, the Cast comes last). `scale` and `offset` are one number for every channel or
    three, one per channel of the output order (R, G, B when `rgb`): a per-channel mean and standard
    deviation (ImageNet's) is scale = 1 / (255 std), offset = -mean / std.

    replicate: beyond the frame the edge pixels repeat (GridSample "border", cv2.BORDER_REPLICATE),
    as for every crop that is pasted back (models.ops.align.warp_paste_crop says why); False: black
    (GridSample "zeros"), as insightface crops for embeddings."""

    size: int
    rgb: bool = False
    scale: float | tuple[float, float, float] = 1.0
    offset: float | tuple[float, float, float] = 0.0
    fp16: bool = False
    replicate: bool = True

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"crop size must be positive, got {self.size}")
        for name in ("scale", "offset"):
            value = getattr(self, name)
            if isinstance(value, tuple) and len(value) != 3:
                raise ValueError(f"crop {name} must be one number or three, got {value}")

    @property
    def scales(self) -> tuple[float, float, float]:
        """The scale of each output channel."""
        return _three(self.scale)

    @property
    def offsets(self) -> tuple[float, float, float]:
        """The offset of each output channel."""
        return _three(self.offset)

    @property
    def uniform(self) -> bool:
        """One scale and one offset for every channel."""
        return len(set(self.scales)) == 1 and len(set(self.offsets)) == 1

    @property
    def plain(self) -> bool:
        return not self.rgb and self.scales == (1.0, 1.0, 1.0) and self.offsets == (0.0, 0.0, 0.0)


def _three(value: float | tuple[float, float, float]) -> tuple[float, float, float]:
    if isinstance(value, tuple):
        return (float(value[0]), float(value[1]), float(value[2]))
    return (float(value), float(value), float(value))


# inswapper_128: RGB, x / 255 (models.wrappers.swappers.inswapper).
# ArcFace: RGB, (x - 127.5) / 127.5 (models.wrappers.arcface).
INSWAPPER_CROP = CropSpec(128, rgb=True, scale=1.0 / 255.0)
ARCFACE_CROP = CropSpec(112, rgb=True, scale=1.0 / 127.5, offset=-1.0, replicate=False)


def checked_affine(m: npt.ArrayLike) -> Matrix2x3:
    mat = np.asarray(m, dtype=np.float64)
    if mat.shape != (2, 3) or not np.all(np.isfinite(mat)):
        raise ValueError(f"expected a finite 2x3 affine matrix, got shape {mat.shape}")
    if abs(float(np.linalg.det(mat[:, :2]))) < 1e-12:
        raise ValueError("the affine matrix is singular (zero scale)")
    return mat


def shift_source(m: Matrix2x3, dx: float, dy: float) -> Matrix2x3:
    """The forward matrix for the same warp when its source is cut at (dx, dy): src' = src - (dx, dy)."""
    out = np.array(m, dtype=np.float64)
    out[:, 2] += out[:, 0] * dx + out[:, 1] * dy
    return out


def shift_target(m: Matrix2x3, dx: float, dy: float) -> Matrix2x3:
    """The forward matrix for the same warp when its output is cut at (dx, dy): dst' = dst - (dx, dy)."""
    out = np.array(m, dtype=np.float64)
    out[0, 2] -= dx
    out[1, 2] -= dy
    return out


def sample_box(m: Matrix2x3, size: int, height: int, width: int) -> Box:
    """The frame pixels bilinear sampling of a size x size crop through `m` (frame->crop) can read.

    The samples are the affine image of the crop's pixel centres, so they lie inside the image of
    its corner centres; bilinear reads floor(x) and floor(x)+1; one more pixel each side absorbs
    the graph's float32 rounding. Never empty: a crop entirely off the frame gets one pixel at the
    nearest edge, whose samples all still land outside it (so the output is black with zeros
    padding, that edge repeated with border padding, as OpenCV's twin gives).
    """
    inv = invert_affine(checked_affine(m))
    s = float(size - 1)
    corners = np.array([[0.0, 0.0], [s, 0.0], [0.0, s], [s, s]]) @ inv[:, :2].T + inv[:, 2]
    lo = np.floor(corners.min(axis=0)) - 1.0
    hi = np.floor(corners.max(axis=0)) + 3.0
    x0 = int(min(max(lo[0], 0.0), width - 1))
    y0 = int(min(max(lo[1], 0.0), height - 1))
    x1 = int(max(min(hi[0], float(width)), x0 + 1))
    y1 = int(max(min(hi[1], float(height)), y0 + 1))
    return Box(x0, y0, x1, y1)


def paste_box(m: Matrix2x3, size: int, height: int, width: int) -> Box:
    """The part of the frame a pasted size x size crop can touch: the same rule as
    realtime.face.host.compositor.paste_region (the warped corners' bounding box, 1-2 px margin).
    May be empty."""
    inv = invert_affine(checked_affine(m))
    s = float(size)
    pts = np.array([[0.0, 0.0], [s, 0.0], [0.0, s], [s, s]]) @ inv[:, :2].T + inv[:, 2]
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    return Box(
        x0=max(int(math.floor(x0)) - 1, 0),
        y0=max(int(math.floor(y0)) - 1, 0),
        x1=min(int(math.ceil(x1)) + 2, width),
        y1=min(int(math.ceil(y1)) + 2, height),
    )


__all__ = [
    "ARCFACE_CROP",
    "INSWAPPER_CROP",
    "CropSpec",
    "checked_affine",
    "paste_box",
    "sample_box",
    "shift_source",
    "shift_target",
]
