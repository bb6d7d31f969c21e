"""How well a face can be seen in one frame, for the identity check: a look at a face half behind
someone, half out of the picture or turned away reads as someone else even with a real recogniser
(dlib: 0.06-0.12 from the person's own photo, against ~0.02 in full view), so such a look is
taken again once the face is in clearer view instead of waiting out the retry.

Two shares 0..1: of the face box in the picture and not under another face's box, and how frontal
the landmarks are (the nose midway between the eyes, in the eyes' own frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
HEAD_GROWTH = 0.25  # a head reaches this share of its face box's size beyond it on each side


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
        # The head around a face box (hair, ears, chin) hides more than the box itself.
        ox1, oy1, ox2, oy2 = (float(v) for v in other)
        gx, gy = HEAD_GROWTH * (ox2 - ox1), HEAD_GROWTH * (oy2 - oy1)
        ow = min(x2, ox2 + gx) - max(x1, ox1 - gx)
        oh = min(y2, oy2 + gy) - max(y1, oy1 - gy)
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


FULL_VIEW = 0.97  # a face this much in view is as clear as it gets: worth a look when it gets there


@dataclass(frozen=True, slots=True)
class View:
    """How clearly a face is seen in one frame: its share in view and how frontal it is (0..1)."""

    visible: float = 0.0
    frontal: float = 0.0

    def clearer_than(self, before: View, gain: float) -> bool:
        """Clearly better seen than `before`: `gain` more in view or more frontal (not less of the
        other), or in full view now and not then."""
        if self.visible < before.visible - gain or self.frontal < before.frontal - gain:
            return False
        return (
            self.visible >= before.visible + gain
            or self.frontal >= before.frontal + gain
            or (self.visible >= FULL_VIEW > before.visible)
        )


def view_of(box: F32, kps: F32, others: Sequence[F32], frame_size: tuple[int, int] | None) -> View:
    """How clearly a face is seen now, see the module doc."""
    return View(visible_share(box, others, frame_size), frontal_share(kps))


__all__ = ["FULL_VIEW", "View", "frontal_share", "view_of", "visible_share"]
