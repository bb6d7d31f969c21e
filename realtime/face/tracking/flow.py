"""Optical flow of the tracker: pyramidal Lucas-Kanade on a small grey copy of the frame, checked
(forward-backward error, a RANSAC similarity fit, the landmarks' spread against the previous box)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from models.types import FloatArray, ImageBGR
from realtime.face.tracking.geometry import centre_spread
from realtime.face.tracking.state import FlowResult, GreyImage, Track

_LK_WIN = (11, 11)
_LK_LEVELS = 3
_LK_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03)
EXTRA_CORNERS = 10  # corner points per face besides the 5 landmarks
_MIN_GOOD_POINTS = 5  # below this the similarity fit is not trusted
_MIN_INLIER_RATIO = 0.5  # share of a track's points that must survive the checks


def flow_geometry(height: int, width: int, max_side: int) -> tuple[float, tuple[int, int]]:
    """(scale, (rows, cols)) of the small grey image the flow runs on: longer side <= max_side."""
    scale = min(1.0, max_side / max(height, width))
    return scale, (max(1, round(height * scale)), max(1, round(width * scale)))


def write_flow_image(image: ImageBGR, out: GreyImage, scratch_bgr: ImageBGR | None = None) -> None:
    """`image` shrunk to `out`'s size and made grey, into `out`. `scratch_bgr`: an (rows, cols, 3)
    buffer for the shrunk colour picture (allocated when not given or of another size)."""
    h, w = out.shape
    if (h, w) == image.shape[:2]:
        cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=out)
        return
    if scratch_bgr is None or scratch_bgr.shape != (h, w, 3):
        scratch_bgr = np.empty((h, w, 3), dtype=np.uint8)
    # Shrink first, then convert; a nearest-neighbour shrink is the cheapest and loses nothing:
    # LK's own pyramid smooths what it aliases (figures: docs/PERFORMANCE.md, "Figures behind
    # the code").
    cv2.resize(image, (w, h), dst=scratch_bgr, interpolation=cv2.INTER_NEAREST)
    cv2.cvtColor(scratch_bgr, cv2.COLOR_BGR2GRAY, dst=out)


def flow_image(image: ImageBGR, max_side: int) -> GreyImage:
    """A new small grey copy of `image` for the flow (see FaceTracker.prepare). New per frame on
    purpose: it travels with its frame, which a reused buffer could not (a live camera's frames
    are dropped and replaced while the analysis still reads an older one)."""
    _, (h, w) = flow_geometry(int(image.shape[0]), int(image.shape[1]), max_side)
    out = np.empty((h, w), dtype=np.uint8)
    write_flow_image(image, out)
    return out


def seed_corners(grey: GreyImage, box: FloatArray, scale: float) -> FloatArray:
    """Good-to-track corners of flow image `grey` (`scale` x the frame) in the inner part of the
    face box (frame pixels; the edges hold background, which does not move with the face)."""
    empty = np.empty((0, 2), dtype=np.float32)
    s = scale
    x1, y1, x2, y2 = (float(v) * s for v in box)
    mx, my = 0.2 * (x2 - x1), 0.2 * (y2 - y1)
    h, w = grey.shape
    c0, c1 = max(0, int(x1 + mx)), min(w, int(math.ceil(x2 - mx)))
    r0, r1 = max(0, int(y1 + my)), min(h, int(math.ceil(y2 - my)))
    if c1 - c0 < 8 or r1 - r0 < 8:
        return empty
    side = min(c1 - c0, r1 - r0)
    found = cv2.goodFeaturesToTrack(
        grey[r0:r1, c0:c1], EXTRA_CORNERS, qualityLevel=0.01, minDistance=max(2.0, side / 8.0)
    )
    if found is None:
        return empty
    pts = found.reshape(-1, 2).astype(np.float32)
    pts[:, 0] += c0
    pts[:, 1] += r0
    return pts


@dataclass(frozen=True, slots=True)
class FlowChecks:
    """fb_threshold: forward-backward error limit, flow-image px; max_scale_step: the most a face
    may grow or shrink from one frame to the next."""

    fb_threshold: float = 1.0
    max_scale_step: float = 1.25


def flow_all(
    prev: GreyImage,
    cur: GreyImage,
    tracks: Sequence[Track],
    scale: float,
    frame_shape: tuple[int, ...],
    checks: FlowChecks,
) -> list[FlowResult | None]:
    """One forward and one backward LK call for every track's points together (flow images at
    `scale` x the frame)."""
    s = scale
    s32 = np.float32(s)
    groups = [np.concatenate((t.raw_kps * s32, t.corners), dtype=np.float32) for t in tracks]
    p0 = (groups[0] if len(groups) == 1 else np.concatenate(groups)).reshape(-1, 1, 2)
    p1, st1, _ = cv2.calcOpticalFlowPyrLK(
        prev, cur, p0, np.empty_like(p0), winSize=_LK_WIN, maxLevel=_LK_LEVELS, criteria=_LK_CRITERIA
    )
    # Backward from where the points landed, without the forward start as a hint, so that a
    # point that slid onto the wrong structure does not find its way back by construction.
    p0r, st0, _ = cv2.calcOpticalFlowPyrLK(
        cur, prev, p1, np.empty_like(p0), winSize=_LK_WIN, maxLevel=_LK_LEVELS, criteria=_LK_CRITERIA
    )
    # Found both ways, and back within fb_threshold of the start (squared; in Python scalars:
    # on ~15 points numpy's per-call cost is several times the maths).
    limit = checks.fb_threshold * checks.fb_threshold
    back = (p0 - p0r).reshape(-1).tolist()
    good = [
        f == 1 and r == 1 and dx * dx + dy * dy < limit
        for f, r, dx, dy in zip(
            st1.ravel().tolist(), st0.ravel().tolist(), back[0::2], back[1::2], strict=True
        )
    ]
    a = p0.reshape(-1, 2)
    b = np.asarray(p1, dtype=np.float32).reshape(-1, 2)
    results: list[FlowResult | None] = []
    start = 0
    for track, group in zip(tracks, groups, strict=True):
        end = start + group.shape[0]
        results.append(check_flow(track, a[start:end], b[start:end], good[start:end], frame_shape, s, checks))
        start = end
    return results


def check_flow(
    track: Track,
    src: FloatArray,
    dst: FloatArray,
    good: list[bool],
    frame_shape: tuple[int, ...],
    scale: float,
    checks: FlowChecks,
) -> FlowResult:
    """`good`: per point, whether its flow passed the forward-backward check. (Index lists in
    Python: on ~15 points numpy's per-call cost is most of this function's time.)"""
    s = scale
    fail = FlowResult(False, track.raw_kps, 0.0, track.corners, None)
    n = src.shape[0]
    kept = [i for i, ok in enumerate(good) if ok]
    if len(kept) < _MIN_GOOD_POINTS:
        return fail
    # A similarity (rotation, uniform scale, shift) over all surviving points, RANSAC so that
    # a few points on background or a moving hand cannot bend it.
    m, inl = cv2.estimateAffinePartial2D(
        src[kept], dst[kept], method=cv2.RANSAC, ransacReprojThreshold=checks.fb_threshold * 1.5
    )
    if m is None or inl is None:
        return fail
    inliers = [False] * n
    for i, fits in zip(kept, inl.ravel().tolist(), strict=True):
        inliers[i] = fits == 1
    ratio = sum(inliers) / n
    (a, b, tx), (c, d, ty) = m.tolist()
    step_scale = math.sqrt(abs(a * d - b * c))
    if ratio < _MIN_INLIER_RATIO or not 1.0 / checks.max_scale_step <= step_scale <= checks.max_scale_step:
        return fail

    # Landmarks: each keeps its own flow where that passed the checks (it follows expressions
    # the rigid fit cannot), else the fitted motion moves it.
    # (Five points in Python scalars: numpy's per-call cost is most of this function's time.)
    moved = [
        (qx / s, qy / s) if ok else ((a * px + b * py + tx) / s, (c * px + d * py + ty) / s)
        for (px, py), (qx, qy), ok in zip(src[:5].tolist(), dst[:5].tolist(), inliers[:5], strict=True)
    ]
    kps = np.array(moved, dtype=np.float32)

    # Box consistency: the landmarks' spread must not jump against the previous box.
    prev_spread = centre_spread(track.raw_kps)[2]
    cx, cy, new_spread = centre_spread(kps)
    if prev_spread <= 0:
        return fail
    if not 1.0 / checks.max_scale_step <= new_spread / prev_spread <= checks.max_scale_step:
        return fail
    h, w = frame_shape[:2]
    if not (0.0 <= cx < w and 0.0 <= cy < h):
        return fail  # the face centre left the frame

    corners = dst[[i for i in range(5, n) if inliers[i]]]  # a new float32 array
    motion = m.astype(np.float64)
    motion[:, 2] /= s  # small-image shift -> full-frame shift; the linear part is scale-free
    return FlowResult(True, kps, ratio, corners, motion)


__all__ = [
    "EXTRA_CORNERS",
    "FlowChecks",
    "check_flow",
    "flow_all",
    "flow_geometry",
    "flow_image",
    "seed_corners",
    "write_flow_image",
]
