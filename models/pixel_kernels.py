"""Compiled pixel loops for the CPU path, where OpenCV has no single call for the job.

Each kernel does in one pass over memory what took OpenCV and numpy four to six passes with
temporaries (a blend: split the alpha, two float weight images, a float blend). They are compiled
by Numba ahead of first use with fixed signatures (one compiled version, whatever the array
layout), cached on disk, and release the GIL so the engine's threads run them side by side.

Rounding is exact integer rounding (documented per kernel); tests hold each kernel to a float
reference.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt


@numba.njit("void(u1[:, :, ::1], u1[:, :, :], i4)", nogil=True, cache=True)
def _blend_bgra_into(warped: Any, roi: Any, opacity_255: int) -> None:
    h, w = roi.shape[0], roi.shape[1]
    for y in range(h):
        src = warped[y]
        dst = roi[y]
        for x in range(w):
            # round(x / 255) for 0 <= x <= 65025 as (t + (t >> 8)) >> 8 with t = x + 128: exact
            # (tested over every x), and several times faster than a division in this loop.
            t = np.int32(src[x, 3]) * opacity_255 + 128
            a = (t + (t >> 8)) >> 8  # alpha x opacity, rounded to 0..255
            if a == 0:
                continue  # outside the face: the frame's pixel stays exactly as it was
            if a == 255:
                dst[x, 0] = src[x, 0]
                dst[x, 1] = src[x, 1]
                dst[x, 2] = src[x, 2]
                continue
            keep = 255 - a
            for c in range(3):
                t = np.int32(src[x, c]) * a + np.int32(dst[x, c]) * keep + 128
                dst[x, c] = (t + (t >> 8)) >> 8


def blend_bgra_into(warped: npt.NDArray[np.uint8], roi: npt.NDArray[np.uint8], opacity: float = 1.0) -> None:
    """roi = warped.bgr * a + roi * (1 - a), a = warped.alpha / 255 * opacity, in place.

    `warped`: (h, w, 4) uint8, C-contiguous (the paste warp's output); `roi`: (h, w, 3) uint8, any
    strides (a view into the frame). Integer maths, rounded to nearest: pixels where a is 0 are
    not touched, where a is 1 they are the warped colour exactly. With an `opacity` below 1 the
    opacity and alpha times opacity are rounded to 1/255 steps first (within 1.5 levels of the float
    blend; a fading face lasts a few frames).
    """
    if warped.shape[:2] != roi.shape[:2] or warped.shape[2:] != (4,) or roi.shape[2:] != (3,):
        raise ValueError(f"blend: warped {warped.shape} and roi {roi.shape} must be (h, w, 4) and (h, w, 3)")
    if warped.dtype != np.uint8 or roi.dtype != np.uint8 or not warped.flags.c_contiguous:
        raise ValueError("blend: both images must be uint8 and `warped` C-contiguous")
    level = round(min(max(float(opacity), 0.0), 1.0) * 255.0)
    if level == 0 or roi.size == 0:
        return
    _blend_bgra_into(warped, roi, level)


__all__ = ["blend_bgra_into"]
