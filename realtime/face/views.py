"""How well a face can be seen in one frame, for the identity check: a look at a face half behind
someone, half out of the picture or turned away reads as someone else even with a real recogniser
(dlib: 0.06-0.12 from the person's own photo, against ~0.02 in full view), so such a look is
taken again once the face is in clearer view instead of waiting out the retry.

A score 0..1: the share of the face box in the picture and not under another face's box, times
how frontal the landmarks are (the nose midway between the eyes, in the eyes' own frame).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def _area(box: F32) -> float:
    return max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)


def visible_share(box: F32, others: Sequence[F32], frame_size: tuple[int, int] | None) -> float:
    """Share of `box` inside a (width, height) frame and not under any of `others` (0..1)."""
    area = _area(box)
    if area <= 0.0:
        return 0.0
    x1, y1, x2, y2 = (float(v) for v in box)
    hidden = 0.0
    if frame_size is not None:
        w, h = frame_size
        inside = max(min(x2, w) - max(x1, 0.0), 0.0) * max(min(y2, h) - max(y1, 0.0), 0.0)
        hidden += area - inside
    for other in others:
        ow = min(x2, float(other[2])) - max(x1, float(other[0]))
        oh = min(y2, float(other[3])) - max(y1, float(other[1]))
        hidden += max(ow, 0.0) * max(oh, 0.0)
    return float(np.clip(1.0 - hidden / area, 0.0, 1.0))


def frontal_share(kps: F32) -> float:
    """1 for a face seen straight on, falling to 0 as the nose reaches an eye (a head turned)."""
    k = np.asarray(kps, dtype=np.float64).reshape(5, 2)
    eye_line = k[1] - k[0]
    io = float(np.linalg.norm(eye_line))
    if io < 1e-6:
        return 0.0
    along = eye_line / io
    offset = float((k[2] - (k[0] + k[1]) / 2.0) @ along)  # the nose's sideways offset
    return float(np.clip(1.0 - abs(offset) / (io / 2.0), 0.0, 1.0))


def view_score(box: F32, kps: F32, others: Sequence[F32], frame_size: tuple[int, int] | None) -> float:
    """How clearly a face can be seen now (0..1), see the module doc."""
    return visible_share(box, others, frame_size) * frontal_share(kps)


__all__ = ["frontal_share", "view_score", "visible_share"]
