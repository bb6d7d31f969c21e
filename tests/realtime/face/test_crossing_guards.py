"""A face passing behind another, as a viewer sees it: while it is hidden no swap is drawn for it on
the face or hair in front, and it comes back out under its own track id.

Two heads cut from insightface's group photo (real texture, so the optical flow is real) slide past
each other at detection interval 6: the one behind moves right at 3 px/frame, the one in front left
at 5 px/frame and hides it completely for 9 frames. A scripted detector reports exactly the faces
that are at least 60 % in view, at their known landmarks, so the test does not hang on a detector's
luck.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from models.types import Detection, ImageBGR
from realtime.core.settings import TrackerSettings
from realtime.face.tracker import FaceTracker, TrackedFace
from tests.real_faces import group_photo_bgr, group_photo_faces, transform_points

FPS = 30.0
F32 = npt.NDArray[np.float32]
SIZE = (900, 400)
PATCH = 160  # px, each head's square
MARGIN = 1.3  # the square's side over the face box's longer side: hair and shoulders around it
BACKGROUND = (96, 96, 96)
BEHIND, IN_FRONT = 2, 5  # group photo faces
INTERVAL = 6
MIN_VISIBLE = 0.6  # the scripted detector reports a face with at least this share of its box in view


class Truth:
    """Per frame: each face's box (4,) and landmarks (5, 2), and the share of the face behind in view."""

    def __init__(self) -> None:
        self.boxes: list[tuple[F32, F32]] = []
        self.kps: list[tuple[F32, F32]] = []
        self.visible: list[float] = []


def _head(face_id: int) -> tuple[ImageBGR, F32, F32]:
    """The face's head cut as a PATCH-px square: pixels, face box and landmarks in patch pixels."""
    face = group_photo_faces()[face_id]
    x1, y1, x2, y2 = (float(v) for v in face.box)
    side = MARGIN * max(x2 - x1, y2 - y1)
    s = PATCH / side
    m = np.array([[s, 0.0, -((x1 + x2) / 2 - side / 2) * s], [0.0, s, -((y1 + y2) / 2 - side / 2) * s]])
    pixels = cv2.warpAffine(
        group_photo_bgr(), m, (PATCH, PATCH), flags=cv2.INTER_LINEAR, borderValue=BACKGROUND
    )
    box = transform_points(face.box.reshape(2, 2), m).reshape(4)
    return np.asarray(pixels, dtype=np.uint8), box, transform_points(face.kps, m)


def two_heads_clip(
    behind: list[tuple[int, int]], in_front: list[tuple[int, int]]
) -> tuple[list[ImageBGR], Truth]:
    """Per frame, the top-left (x, y) of each head's square; the one in front is drawn last."""
    heads = [_head(BEHIND), _head(IN_FRONT)]
    frames: list[ImageBGR] = []
    truth = Truth()
    for spots in zip(behind, in_front, strict=True):
        frame = np.empty((SIZE[1], SIZE[0], 3), dtype=np.uint8)
        frame[:] = BACKGROUND
        boxes, kps = [], []
        for (pixels, box, points), (x, y) in zip(heads, spots, strict=True):
            frame[y : y + PATCH, x : x + PATCH] = pixels
            offset = np.array([x, y], dtype=np.float32)
            boxes.append(box + np.tile(offset, 2))
            kps.append(points + offset)
        (fx, fy), back = spots[1], boxes[0]
        w = min(float(back[2]), fx + PATCH) - max(float(back[0]), fx)
        h = min(float(back[3]), fy + PATCH) - max(float(back[1]), fy)
        area = float((back[2] - back[0]) * (back[3] - back[1]))
        truth.visible.append(1.0 - max(w, 0.0) * max(h, 0.0) / area)
        truth.boxes.append((boxes[0], boxes[1]))
        truth.kps.append((kps[0], kps[1]))
        frames.append(frame)
    return frames, truth


def crossing_clip() -> tuple[list[ImageBGR], Truth]:
    """The face behind starts at x 370 moving right 3 px/frame; the one in front starts just right
    of it moving left 5 px/frame, and is drawn last. Whole-pixel positions: the truth is exact."""
    start = 370 + PATCH + 10
    n = (2 * (PATCH + 10)) // 8 + 1
    return two_heads_clip([(370 + 3 * i, 100) for i in range(n)], [(start - 5 * i, 100) for i in range(n)])


class VisibleFaces:
    """A detector that reports exactly the faces at least MIN_VISIBLE in view (the loop sets `frame`)."""

    def __init__(self, truth: Truth) -> None:
        self.truth = truth
        self.frame = 0

    def __call__(self, image: ImageBGR) -> list[Detection]:
        i = self.frame
        (box_b, box_f), (kps_b, kps_f) = self.truth.boxes[i], self.truth.kps[i]
        found = [Detection(box_f.copy(), kps_f.copy(), 0.99)]
        if self.truth.visible[i] >= MIN_VISIBLE:
            found.append(Detection(box_b.copy(), kps_b.copy(), 0.99))
        return found


def _err(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64), axis=1).mean())


def _on(face: TrackedFace, kps: F32) -> bool:
    return _err(face.kps, kps) < 10.0


def test_a_face_crossing_behind_another_is_not_swapped_while_hidden_and_keeps_its_id() -> None:
    """If this broke, a viewer would see the hidden person's swap come back on the hair or face of
    the one in front (a ghost swap riding along with them) and, once the person re-emerged, a new
    track id: a locked target ("largest", "reference") would let go or jump to the other person."""
    frames, truth = crossing_clip()
    detector = VisibleFaces(truth)
    # max_missed covers the 22 frames the face behind is not detected, so its track may survive.
    tracker = FaceTracker(detector, TrackerSettings(max_missed=30), interval=INTERVAL)
    hidden = 0
    for i, frame in enumerate(frames):
        detector.frame = i
        faces = tracker.update(frame, i / FPS)
        if i == 0:
            assert len(faces) == 2
            behind_id = next(f.track_id for f in faces if _on(f, truth.kps[0][0]))
            front_id = next(f.track_id for f in faces if _on(f, truth.kps[0][1]))
        by_id = {f.track_id: f for f in faces}
        front = by_id.get(front_id)
        assert front is not None and _on(front, truth.kps[i][1]), (
            f"frame {i}: the face in front lost its track"
        )
        if truth.visible[i] >= 0.99:
            back = by_id.get(behind_id)
            assert back is not None and _on(back, truth.kps[i][0]), (
                f"frame {i}: the face behind, in full view again, is not on its own track {behind_id}: "
                f"{[(f.track_id, round(_err(f.kps, truth.kps[i][0]), 1)) for f in faces]}"
            )
        if truth.visible[i] < 0.01:
            hidden += 1
            shown = [(f.track_id, round(f.swap_weight, 2)) for f in faces if f.swap_weight > 0.0]
            assert shown == [(front_id, 1.0)], (
                f"frame {i}: a swap is drawn for a face nobody can see: {shown}"
            )
    assert hidden >= 8  # the clip really hides the face behind for a while
