"""Five-point face alignment: the similarity transform to the ArcFace template and the crop.

Matches insightface's utils/face_align.estimate_norm (skimage SimilarityTransform, i.e. Umeyama
without reflection) but needs neither skimage nor a per-call object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import cv2
import numpy as np
import numpy.typing as npt

from models.types import FloatArray, ImageBGR

Matrix2x3 = npt.NDArray[np.float64]

# Eyes, nose tip, mouth corners in a 112 px ArcFace crop.
ARCFACE_TEMPLATE_112: FloatArray = np.array(
    [
        [38.2946, 51.6963],
        [73.5318, 51.5014],
        [56.0252, 71.7366],
        [41.5493, 92.3655],
        [70.7299, 92.2041],
    ],
    dtype=np.float32,
)

# The same five points in the 512 px FFHQ crop used by GFPGAN/GPEN/CodeFormer.
FFHQ_TEMPLATE_512: FloatArray = np.array(
    [
        [192.98138, 239.94708],
        [318.90277, 240.19366],
        [256.63416, 314.01935],
        [201.26117, 371.41043],
        [313.08905, 371.15118],
    ],
    dtype=np.float32,
)


def arcface_template(size: int) -> FloatArray:
    """The ArcFace template for a `size` px crop, as insightface scales it.

    Sizes divisible by 112 scale the template; sizes divisible by 128 (inswapper's 128 px crop)
    scale by size/128 and shift x by 8*size/128, so the face sits a little wider in the crop.
    """
    if size % 112 == 0:
        ratio, diff_x = size / 112.0, 0.0
    elif size % 128 == 0:
        ratio, diff_x = size / 128.0, 8.0 * size / 128.0
    else:
        raise ValueError(f"ArcFace crop size must be a multiple of 112 or 128, got {size}")
    dst = ARCFACE_TEMPLATE_112 * np.float32(ratio)
    dst[:, 0] += np.float32(diff_x)
    return dst


def similarity_transform(src: npt.ArrayLike, dst: npt.ArrayLike) -> Matrix2x3:
    """Least-squares rotation + uniform scale + translation mapping src points onto dst.

    Returns the 2x3 forward matrix (src -> dst), float64. In 2-D the least-squares similarity has
    a closed form: with both point sets centred, the map is the complex factor
    z = sum(conj(s) * d) / sum(|s|^2) (a rotation and a scale >= 0), which is the optimum Umeyama's
    SVD (skimage's SimilarityTransform, insightface's choice) finds over rotations. The two agree
    to ~1e-12 (tested against skimage); this runs once per face per frame, 8x faster than the SVD.
    """
    s = np.asarray(src, dtype=np.float64).reshape(-1, 2).tolist()
    d = np.asarray(dst, dtype=np.float64).reshape(-1, 2).tolist()
    return similarity_points(s, d)


Points = Sequence[Sequence[float]]  # [(x, y), ...] in Python floats


def similarity_points(s: Points, d: Points) -> Matrix2x3:
    """similarity_transform on points as Python sequences of (x, y)."""
    n = len(s)
    if n == 0 or len(d) != n:
        raise ValueError(f"similarity: {n} source and {len(d)} destination points")
    sx = math.fsum(p[0] for p in s) / n
    sy = math.fsum(p[1] for p in s) / n
    dx = math.fsum(p[0] for p in d) / n
    dy = math.fsum(p[1] for p in d) / n
    dot = cross = var = 0.0
    for (px, py), (qx, qy) in zip(s, d, strict=True):
        px, py, qx, qy = px - sx, py - sy, qx - dx, qy - dy
        dot += px * qx + py * qy
        cross += px * qy - py * qx
        var += px * px + py * py
    if not var > 0.0:  # also catches NaN
        raise ValueError("degenerate landmarks: all points coincide")
    a, b = dot / var, cross / var
    return np.array([[a, -b, dx - (a * sx - b * sy)], [b, a, dy - (b * sx + a * sy)]], dtype=np.float64)


def estimate_norm(kps: npt.ArrayLike, size: int) -> Matrix2x3:
    """2x3 matrix taking frame pixels to a `size` px ArcFace-aligned crop."""
    pts = np.asarray(kps, dtype=np.float64).reshape(5, 2).tolist()
    template: Points | None = _TEMPLATE_POINTS.get(size)
    if template is None:
        template = arcface_template(size).astype(np.float64).tolist()
    return similarity_points(pts, template)


# The templates of the crop sizes in use, as the float64 lists estimate_norm needs (made once: per
# face and frame the float32 scaling and the conversion cost more than the fit). Read-only.
_TEMPLATE_POINTS: Mapping[int, Points] = MappingProxyType(
    {
        size: tuple((x, y) for x, y in arcface_template(size).astype(np.float64).tolist())
        for size in (112, 128, 224, 256, 512)
    }
)


def invert_affine(m: Matrix2x3) -> Matrix2x3:
    return np.asarray(cv2.invertAffineTransform(m), dtype=np.float64)


def warp_crop(image: ImageBGR, m: Matrix2x3, size: int, out: ImageBGR | None = None) -> ImageBGR:
    """Crop `size` x `size` pixels through `m` (bilinear, black outside the frame)."""
    if out is not None:
        cv2.warpAffine(image, m, (size, size), dst=out, borderValue=0.0)
        return out
    return np.asarray(cv2.warpAffine(image, m, (size, size), borderValue=0.0), dtype=np.uint8)


def warp_paste_crop(image: ImageBGR, m: Matrix2x3, size: int, out: ImageBGR | None = None) -> ImageBGR:
    """Crop `size` x `size` pixels through `m` (bilinear) for a crop whose result is pasted back:
    beyond the frame the edge pixels are repeated. With black there (insightface's crop), a face cut
    by the frame's edge comes back with a dark line along that edge (bilinear taps mix the black
    into the last row and column), and the swapper and the colour match see a black slab.
    Embeddings keep `warp_crop`'s black border, as insightface computes them."""
    dst = np.empty((size, size, 3), dtype=np.uint8) if out is None else out
    cv2.warpAffine(image, m, (size, size), dst=dst, borderMode=cv2.BORDER_REPLICATE)
    return dst


def norm_crop(image: ImageBGR, kps: npt.ArrayLike, size: int = 112) -> tuple[ImageBGR, Matrix2x3]:
    """Aligned crop and its matrix, like insightface's norm_crop2."""
    m = estimate_norm(kps, size)
    return warp_crop(image, m, size), m


def transform_points(points: npt.ArrayLike, m: Matrix2x3) -> FloatArray:
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    return np.asarray(pts @ m[:, :2].T + m[:, 2], dtype=np.float32)


def plausible_landmarks(kps: npt.ArrayLike) -> bool:
    """Whether five landmarks can be a face to align: finite, with the eyes apart and the mouth on
    the side of the eye line a face has it (at any roll). A mirrored set (left and right swapped)
    has no similarity fit: its scale collapses and the 'face' crop would take in the whole frame,
    which the paste would then smear over every pixel."""
    # Ten numbers in Python scalars: this runs on every face of every frame, and numpy's per-call
    # cost on a (5, 2) array is ten times the maths.
    values = np.asarray(kps, dtype=np.float64).reshape(10).tolist()
    if not all(math.isfinite(v) for v in values):
        return False
    x0, y0, x1, y1, _, _, x3, y3, x4, y4 = values
    ex, ey = x1 - x0, y1 - y0
    down_x = (x3 + x4) / 2.0 - (x0 + x1) / 2.0
    down_y = (y3 + y4) / 2.0 - (y0 + y1) / 2.0
    eye_distance = math.hypot(ex, ey)
    if eye_distance < 1e-3:
        return False
    # Image y points down: for an upright face, eyes -> mouth turns clockwise from the eye line.
    cross = ex * down_y - ey * down_x
    return cross > 0.1 * eye_distance * eye_distance
