"""Scene cuts: a frame where every track's flow failed and the picture is another shot."""

from __future__ import annotations

import cv2

from realtime.face.tracking.state import GreyImage

# A frame where every track's flow failed is a scene cut when its flow image and the previous one
# are unrelated: normalised cross-correlation (brightness and contrast do not move it, so an
# exposure step or lights going on is no cut) below _CUT_NCC in place AND below _CUT_NCC_MOVED at
# the best shift (a knocked or panning camera moves the whole picture: in place that looks like a
# cut). Measured at 320 px (in place) and 80 px (shifted, +-20 %): cuts between shots -0.08 to 0.06
# in place, 0.21-0.37 at the best shift; a 60-250 px pan or jolt at 720p, smeared or not, 0.84-0.95
# at the best shift; a black box over the face 0.45 in place; +45 levels, x1.4, x0.5, sensor noise
# 0.99-1.0. A flat picture (a black frame, a lens cap) is no shot: below _CUT_MIN_STD grey levels
# of spread on either side nothing is a cut.
_CUT_NCC = 0.15
_CUT_NCC_MOVED = 0.6
_CUT_MIN_STD = 6.0
_CUT_SEARCH = 0.2  # the shifted match: the middle of the new picture searched over +-20 % of the old


def is_scene_cut(cur: GreyImage, prev: GreyImage) -> bool:
    """Whether flow image `cur` shows another shot than `prev` (see _CUT_NCC)."""
    if min(float(cv2.meanStdDev(img)[1][0, 0]) for img in (cur, prev)) < _CUT_MIN_STD:
        return False
    if float(cv2.matchTemplate(cur, prev, cv2.TM_CCOEFF_NORMED)[0, 0]) >= _CUT_NCC:
        return False
    h, w = cur.shape
    tiny = (max(w // 4, 10), max(h // 4, 10))
    old = cv2.resize(prev, tiny, interpolation=cv2.INTER_AREA)
    new = cv2.resize(cur, tiny, interpolation=cv2.INTER_AREA)
    mx, my = max(1, int(tiny[0] * _CUT_SEARCH)), max(1, int(tiny[1] * _CUT_SEARCH))
    middle = new[my:-my, mx:-mx]
    return float(cv2.matchTemplate(old, middle, cv2.TM_CCOEFF_NORMED).max()) < _CUT_NCC_MOVED


__all__ = ["is_scene_cut"]
