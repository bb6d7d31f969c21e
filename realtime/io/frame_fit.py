"""Fitting a frame into an output's fixed, even-sized picture (shared by every sink that resizes)."""

from __future__ import annotations

import cv2
import numpy as np

from models.types import ImageBGR

DEFAULT_FPS = 30.0


def letterbox_into(src: ImageBGR, dst: ImageBGR) -> None:
    """Scale `src` into the preallocated `dst`, keeping its aspect ratio, centred between black bars."""
    dst_h, dst_w = dst.shape[:2]
    src_h, src_w = src.shape[:2]
    if (src_h, src_w) == (dst_h, dst_w):
        np.copyto(dst, src)
        return
    scale = min(dst_w / src_w, dst_h / src_h)
    new_w = max(1, min(dst_w, round(src_w * scale)))
    new_h = max(1, min(dst_h, round(src_h * scale)))
    x0 = (dst_w - new_w) // 2
    y0 = (dst_h - new_h) // 2
    # Only the bars are cleared: the content area is overwritten below, and clearing the bars every
    # time keeps them black even if the source size changed since the last frame.
    dst[:y0] = 0
    dst[y0 + new_h :] = 0
    dst[y0 : y0 + new_h, :x0] = 0
    dst[y0 : y0 + new_h, x0 + new_w :] = 0
    view = dst[y0 : y0 + new_h, x0 : x0 + new_w]
    shrinking = new_w < src_w
    interpolation = cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR
    out = cv2.resize(src, (new_w, new_h), dst=view, interpolation=interpolation)
    if out is not view:
        # cv2 writes into a strided view directly; copy only if a binding ever hands back a new array.
        np.copyto(view, out)


def _even(n: int) -> int:
    """Rounded up: 4:2:0 video needs even sizes, and padding one row/column never scales the picture."""
    return max(2, n + n % 2)
