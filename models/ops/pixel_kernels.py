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
from numba import types as nt

# Argument types of the compiled signatures. Inputs are declared read-only, which accepts writable
# and read-only arrays alike (a caller's read-only picture must not need a copy); "A" takes any
# strides (frame views, Fortran order).
_U8_IMAGE_IN = nt.Array(nt.uint8, 3, "A", readonly=True)
_U8_IMAGE_C_IN = nt.Array(nt.uint8, 3, "C", readonly=True)
_U8_IMAGE_OUT = nt.Array(nt.uint8, 3, "A")
_F32_BLOB_IN = nt.Array(nt.float32, 4, "A", readonly=True)
_F32_BLOB_OUT = nt.Array(nt.float32, 4, "A")


@numba.njit(nt.void(_U8_IMAGE_C_IN, _U8_IMAGE_OUT, nt.int32), nogil=True, cache=True)
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


@numba.njit(nt.void(_U8_IMAGE_IN, _F32_BLOB_OUT, nt.float32), nogil=True, cache=True)
def _bgr_into_rgb_planes(image: Any, blob: Any, scale: float) -> None:
    for y in range(image.shape[0]):
        for x in range(image.shape[1]):
            blob[0, 0, y, x] = np.float32(image[y, x, 2]) * scale
            blob[0, 1, y, x] = np.float32(image[y, x, 1]) * scale
            blob[0, 2, y, x] = np.float32(image[y, x, 0]) * scale


def bgr_into_rgb_planes(image: npt.NDArray[np.uint8], blob: npt.NDArray[np.float32], scale: float) -> None:
    """blob[0] = the (h, w, 3) BGR image as RGB planes times `scale`, float32 (a model's NCHW input).

    The same float32 product as numpy's `plane * np.float32(scale)`, in one pass without the GIL.
    """
    h, w = image.shape[:2]
    if (
        image.dtype != np.uint8
        or image.shape[2:] != (3,)
        or blob.dtype != np.float32
        or blob.shape != (1, 3, h, w)
    ):
        raise ValueError(
            f"planes: need an (h, w, 3) uint8 image and a (1, 3, h, w) float32 blob, "
            f"got {image.shape} {blob.shape}"
        )
    _bgr_into_rgb_planes(image, blob, scale)


@numba.njit(nt.boolean(_F32_BLOB_IN, _U8_IMAGE_OUT, nt.float32), nogil=True, cache=True)
def _rgb_planes_into_bgr(pred: Any, out: Any, scale: float) -> bool:
    h, w = out.shape[0], out.shape[1]
    for c in range(3):
        for y in range(h):
            for x in range(w):
                if not np.isfinite(pred[0, c, y, x]):
                    return False  # checked before anything is written
    for y in range(h):
        for x in range(w):
            for c in range(3):
                v = pred[0, 2 - c, y, x] * scale
                if v < 0.0:
                    v = np.float32(0.0)
                elif v > 255.0:
                    v = np.float32(255.0)
                out[y, x, c] = np.uint8(v)  # truncated, as numpy's astype(np.uint8)
    return True


def rgb_planes_into_bgr(pred: npt.NDArray[np.float32], out: npt.NDArray[np.uint8], scale: float) -> bool:
    """out = clip(pred[0] * scale, 0, 255) as BGR uint8, truncated (insightface's decode: np.clip(255
    * x, 0, 255).astype(np.uint8)), from (1, 3, h, w) float32 RGB planes. False, with `out`
    untouched, if `pred` holds NaN or an infinity. One pass without the GIL."""
    h, w = out.shape[:2]
    if (
        pred.dtype != np.float32
        or pred.shape != (1, 3, h, w)
        or out.dtype != np.uint8
        or out.shape[2:] != (3,)
    ):
        raise ValueError(
            f"planes: need a (1, 3, h, w) float32 prediction and an (h, w, 3) uint8 image, "
            f"got {pred.shape} {out.shape}"
        )
    return bool(_rgb_planes_into_bgr(pred, out, scale))


@numba.njit(nt.void(_U8_IMAGE_IN, _F32_BLOB_OUT, nt.boolean, nt.float32, nt.float32), nogil=True, cache=True)
def _normalise_into(image: Any, blob: Any, swap_rb: bool, mean: float, scale: float) -> None:
    first, last = (2, 0) if swap_rb else (0, 2)
    for y in range(image.shape[0]):
        for x in range(image.shape[1]):
            blob[0, 0, y, x] = (np.float32(image[y, x, first]) - mean) * scale
            blob[0, 1, y, x] = (np.float32(image[y, x, 1]) - mean) * scale
            blob[0, 2, y, x] = (np.float32(image[y, x, last]) - mean) * scale


def normalise_into_blob(
    image: npt.NDArray[np.uint8], blob: npt.NDArray[np.float32], *, swap_rb: bool, mean: float, std: float
) -> None:
    """blob[0, c, :h, :w] = (image[..., c] - mean) / std as float32, channels reversed if `swap_rb`:
    an (h, w, 3) uint8 image (any strides) into the top-left of a (1, 3, H, W) float32 blob, the
    rest of which is left as it is (a letterbox's padding).

    The same float32 operations as numpy's `(plane - mean) * (1 / std)`, in one pass without the
    GIL (numpy's casting loops held it: a tenth of the analysis thread's GIL time).
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"normalise: expected an (h, w, 3) uint8 image, got {image.shape} {image.dtype}")
    if blob.ndim != 4 or blob.shape[:2] != (1, 3) or blob.dtype != np.float32:
        raise ValueError(f"normalise: expected a (1, 3, H, W) float32 blob, got {blob.shape} {blob.dtype}")
    if image.shape[0] > blob.shape[2] or image.shape[1] > blob.shape[3]:
        raise ValueError(f"normalise: the image {image.shape[:2]} does not fit the blob {blob.shape[2:]}")
    _normalise_into(image, blob, swap_rb, mean, 1.0 / std)  # rounded to float32 by the call


__all__ = ["bgr_into_rgb_planes", "blend_bgra_into", "normalise_into_blob", "rgb_planes_into_bgr"]
