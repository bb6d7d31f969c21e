"""How clearly a face is seen, as the identity check uses it: half behind another head, half out
of the picture, or turned away reads as a poorer view than the same face in full view."""

from __future__ import annotations

import numpy as np

from realtime.face.views import View, frontal_share, view_of, visible_share
from realtime.tools.leak_scenes import cut_head, group_photo, turned_head

BOX = np.array([100, 100, 200, 200], dtype=np.float32)


def test_a_face_half_under_another_head_or_half_out_of_the_frame_is_half_in_view() -> None:
    assert visible_share(BOX, [], (640, 480)) == 1.0
    other = np.array([150, 50, 250, 150], dtype=np.float32)  # its head reaches 25 px beyond its box
    assert abs(visible_share(BOX, [other], None) - (1.0 - 75 * 75 / 100**2)) < 1e-6
    assert abs(visible_share(BOX, [], (150, 480)) - 0.5) < 1e-6


def test_a_head_turned_away_is_less_frontal() -> None:
    head = cut_head(group_photo(), 2)
    shares = [frontal_share(turned_head(head, t).kps) for t in (0.0, 0.5, 1.0)]
    assert shares[0] > 0.9 and shares[1] < 0.5 and shares[2] < 0.1


def test_a_clearer_view_is_one_clearly_better_and_not_worse_elsewhere() -> None:
    half = View(0.5, 0.9)
    assert View(0.7, 0.9).clearer_than(half, 0.1)
    assert View(0.98, 0.9).clearer_than(View(0.9, 0.9), 0.1)  # full view is worth a look
    assert not View(0.55, 0.9).clearer_than(half, 0.1)
    assert not View(0.9, 0.5).clearer_than(half, 0.1)  # more in view but turned away
    assert view_of(BOX, np.tile([150.0, 150.0], (5, 1)).astype(np.float32), [], None).frontal == 0.0
