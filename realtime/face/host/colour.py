"""Colour statistics transfer: the swapped face takes the mean and spread of the frame's own face."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from models.types import ImageBGR

Weights = npt.NDArray[np.float32]  # crop-space measurement weights, 0..1
Stats = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]  # per-channel mean, std


def colour_transfer(crop: ImageBGR, reference: ImageBGR, mask: Weights | None = None) -> ImageBGR:
    """Reinhard colour transfer in LAB: give `crop` the mean/std of `reference` (same size).

    The statistics of both crops are measured where the face is: weighted by `mask` (crop space,
    0..1, e.g. the parser's skin with occluders and the mouth cut out) when given, else over the
    central half of the crop, so hair and background do not bias the skin. With a mask that holds
    too little face to measure (under 16 px of weight) the crop is returned unchanged.
    """
    src = np.asarray(cv2.cvtColor(crop, cv2.COLOR_BGR2LAB), dtype=np.uint8)
    ref = np.asarray(cv2.cvtColor(reference, cv2.COLOR_BGR2LAB), dtype=np.uint8)
    if mask is None:
        c = crop.shape[0]
        lo, hi = c // 4, c - c // 4
        weights = np.zeros(crop.shape[:2], dtype=np.float32)
        weights[lo:hi, lo:hi] = 1.0
    else:
        if mask.shape != crop.shape[:2]:
            raise ValueError(f"mask {mask.shape} does not match the crop {crop.shape[:2]}")
        weights = np.asarray(mask, dtype=np.float32)
    total = float(weights.sum())
    if total < 16.0:
        return crop.copy()
    (s_mean, s_std), (r_mean, r_std) = _weighted_stats(src, ref, weights, total)
    # out = (x - s_mean) * gain + r_mean per channel, as one affine transform on the uint8 LAB
    # image (one SIMD pass, saturating). The -0.4999 makes OpenCV's rounding a truncation, as the
    # float maths' clip-and-cast would do.
    # Bounded: the reference's spread includes its sensor noise, and in a dark, noisy webcam frame
    # an unbounded gain multiplied the face's colour detail 3-7x (cyan teeth, magenta lips). The
    # colour channels (a, b) may gain less than lightness.
    gain = np.clip(r_std / s_std, _GAIN_LOW, _GAIN_HIGH)
    affine = np.zeros((3, 4), dtype=np.float64)
    affine[[0, 1, 2], [0, 1, 2]] = gain
    affine[:, 3] = r_mean - s_mean * gain - 0.4999
    lab = cv2.transform(src, affine)
    return np.asarray(cv2.cvtColor(lab, cv2.COLOR_LAB2BGR), dtype=np.uint8)


# Colour transfer gain bounds per LAB channel (L, a, b).
_GAIN_LOW = np.array([0.5, 0.67, 0.67])


_GAIN_HIGH = np.array([2.0, 1.5, 1.5])


def _weighted_stats(
    src: npt.NDArray[np.uint8], ref: npt.NDArray[np.uint8], weights: Weights, total: float
) -> tuple[Stats, Stats]:
    """Per-channel weighted mean and standard deviation (+1e-3 so a flat patch cannot divide by 0)
    of both LAB crops, from one float64 matrix-vector product: [x, x^2] of six channels, weighted."""
    n = weights.size
    cols = np.empty((n, 12), dtype=np.float64)
    cols[:, 0:3] = src.reshape(n, 3)
    cols[:, 3:6] = ref.reshape(n, 3)
    np.square(cols[:, 0:6], out=cols[:, 6:12])
    moments = (weights.reshape(n).astype(np.float64) @ cols) / total
    mean = moments[0:6]
    # E[x^2] - E[x]^2 in float64: exact enough for 8-bit data (no float32 cancellation).
    std = np.sqrt(np.maximum(moments[6:12] - mean * mean, 0.0)) + 1e-3
    return (mean[0:3], std[0:3]), (mean[3:6], std[3:6])
