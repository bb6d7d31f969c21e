"""Box and landmark geometry of the tracker: boxes from landmarks, overlaps, centres, spreads."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from models.types import Detection, FloatArray
from realtime.face.tracking.state import Affine

# A detection this far (x face spread: ~30 px for a 100 px face) from the smoothed landmarks is a
# jump (someone else framed alike: 0.4), not the detector's noise (2 px on a 100 px face: 0.08).
JUMP = 0.25
# A crowded track's flow may differ from its speed by this x its landmark spread (the spread is
# ~0.3 x the face box's width: 0.05 is ~1.5 % of the width, 1.35 px on a 90 px face).
CROWDED_STEP = 0.05
MATCH_IOU = 0.3  # a detection continues a track only with at least this overlap


def usable_detection(det: Detection) -> bool:
    box = np.asarray(det.box, dtype=np.float64)
    finite = bool(np.all(np.isfinite(box)) and np.all(np.isfinite(det.kps)) and math.isfinite(det.score))
    return finite and box[2] - box[0] >= 1.0 and box[3] - box[1] >= 1.0


def shifted(kps: FloatArray, step: npt.NDArray[np.float64]) -> FloatArray:
    return (kps + step).astype(np.float32)


def nearest_on_path(start: FloatArray, end: FloatArray, target: FloatArray) -> FloatArray:
    """The box sliding from `start` to `end` (same size as `end`) at the point where its centre is
    nearest `target`'s centre."""
    a, b = box_middle(start), box_middle(end)
    path = b - a
    length2 = float(path @ path)
    t = 1.0 if length2 <= 1e-9 else min(max(float((box_middle(target) - a) @ path) / length2, 0.0), 1.0)
    shift = (t - 1.0) * path
    return (end.astype(np.float64) + np.concatenate([shift, shift])).astype(np.float32)


def box_middle(box: FloatArray) -> npt.NDArray[np.float64]:
    return (box[:2].astype(np.float64) + box[2:].astype(np.float64)) / 2.0


def overlaps(box: FloatArray, others: npt.NDArray[np.float32]) -> bool:
    """True when `box` overlaps any of `others` (faces a detection gave to other tracks)."""
    return others.shape[0] > 0 and float(iou_matrix(box[None, :], others).max()) >= MATCH_IOU


def grown(box: FloatArray, factor: float) -> FloatArray:
    """`box` scaled by `factor` about its centre."""
    c = (box[:2] + box[2:]) / 2.0
    half = (box[2:] - box[:2]) * (factor / 2.0)
    return np.concatenate([c - half, c + half]).astype(np.float32)


def crowded_bound(kps: FloatArray) -> float:
    """How far (px) a crowded face's flow may stray: CROWDED_STEP x its landmark spread, >= 1 px."""
    return max(1.0, CROWDED_STEP * spread(kps))


def centre_gap(a: FloatArray, b: FloatArray) -> float:
    return float(np.linalg.norm(centre(a) - centre(b)))


def translation(step: npt.NDArray[np.float64]) -> Affine:
    return np.array([[1.0, 0.0, step[0]], [0.0, 1.0, step[1]]], dtype=np.float64)


def centre_spread(kps: FloatArray) -> tuple[float, float, float]:
    """(x, y) of the mean landmark position and the landmarks' RMS distance from it, in float64.
    Python scalars: on five points numpy's per-call cost was ten times the maths, and these run
    several times per face per frame on the analysis thread (the pipeline's serial stage)."""
    pts = kps.tolist()
    n = len(pts)
    sx = sy = 0.0
    for x, y in pts:
        sx += x
        sy += y
    cx, cy = sx / n, sy / n
    ss = 0.0
    for x, y in pts:
        dx, dy = x - cx, y - cy
        ss += dx * dx + dy * dy
    return cx, cy, math.sqrt(ss / n)


def centre(kps: FloatArray) -> npt.NDArray[np.float64]:
    """Mean landmark position, float64."""
    cx, cy, _ = centre_spread(kps)
    return np.array((cx, cy))


def jumped(smoothed: npt.NDArray[np.float64] | None, kps: FloatArray) -> bool:
    """Whether a detection lies away from the smoothed landmarks (by a tenth of the face's size)."""
    if smoothed is None:
        return False
    gap = float(np.linalg.norm(np.asarray(smoothed, dtype=np.float64) - kps, axis=1).mean())
    return gap > JUMP * max(spread(kps), 1.0)


def spread(kps: FloatArray) -> float:
    """RMS distance of the landmarks from their centre: a rotation-free size of the face."""
    return centre_spread(kps)[2]


def relative_box(det: Detection) -> npt.NDArray[np.float64]:
    """The detector's box in landmark units, so it can be rebuilt around moved landmarks."""
    c = centre(det.kps)
    sp = max(spread(det.kps), 1e-3)
    return (det.box.astype(np.float64) - np.concatenate([c, c])) / sp


def box_from_kps(kps: FloatArray, rel_box: npt.NDArray[np.float64]) -> FloatArray:
    cx, cy, spread = centre_spread(kps)
    sp = max(spread, 1e-3)
    x0, y0, x1, y1 = rel_box.tolist()
    return np.array((cx + x0 * sp, cy + y0 * sp, cx + x1 * sp, cy + y1 * sp), dtype=np.float32)


def box_area(box: FloatArray) -> float:
    return max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)


def max_pair_iou(boxes: npt.NDArray[np.float32]) -> float:
    iou = iou_matrix(boxes, boxes)
    np.fill_diagonal(iou, 0.0)
    return float(iou.max())


def iou_matrix(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """IoU of every box in a (N, 4) with every box in b (M, 4)."""
    a64, b64 = a.astype(np.float64)[:, None, :], b.astype(np.float64)[None, :, :]
    iw = np.clip(np.minimum(a64[..., 2], b64[..., 2]) - np.maximum(a64[..., 0], b64[..., 0]), 0.0, None)
    ih = np.clip(np.minimum(a64[..., 3], b64[..., 3]) - np.maximum(a64[..., 1], b64[..., 1]), 0.0, None)
    inter = iw * ih
    area_a = (a64[..., 2] - a64[..., 0]).clip(0.0) * (a64[..., 3] - a64[..., 1]).clip(0.0)
    area_b = (b64[..., 2] - b64[..., 0]).clip(0.0) * (b64[..., 3] - b64[..., 1]).clip(0.0)
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
