"""Paste a swapped face crop back into the frame — only inside the face's region.

insightface warps the crop, a white mask and a diff image over the WHOLE frame and erodes and
blurs a frame-sized mask (26 ms at 720p, 52 ms at 1080p on a 2-core CPU). Here the feathered mask
is made once in crop space (erosion and blur scaled to the face, as insightface scales them in
frame space) and cached; per frame only the crop and its mask are warped into the face's bounding
region and blended there. Every pixel outside that region is left exactly as it came in.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import cv2
import numpy as np
import numpy.typing as npt

from models.align import Matrix2x3, invert_affine
from models.types import ImageBGR

MaskArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class MaskSettings:
    """Feathering of the pasted face, as fractions of the face's size (insightface: 1/10, 1/20)."""

    erode_ratio: float = 0.1
    blur_ratio: float = 0.05
    min_erode_px: int = 10
    min_blur_px: int = 5


@dataclass(frozen=True, slots=True)
class Region:
    """A rectangle of the frame, [y0:y1, x0:x1]."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def empty(self) -> bool:
        return self.x1 <= self.x0 or self.y1 <= self.y0


def crop_scale(m: Matrix2x3) -> float:
    """Crop pixels per frame pixel for a similarity transform."""
    return float(math.sqrt(abs(np.linalg.det(m[:, :2]))))


def paste_region(frame_shape: tuple[int, ...], crop_size: int, m: Matrix2x3) -> Region:
    """The part of the frame the pasted crop can touch (its warped corners' bounding box)."""
    im = invert_affine(m)
    s = float(crop_size)
    corners = np.array([[0, 0], [s, 0], [0, s], [s, s]], dtype=np.float64)
    pts = corners @ im[:, :2].T + im[:, 2]
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    h, w = int(frame_shape[0]), int(frame_shape[1])
    return Region(
        x0=max(int(math.floor(x0)) - 1, 0),
        y0=max(int(math.floor(y0)) - 1, 0),
        x1=min(int(math.ceil(x1)) + 2, w),
        y1=min(int(math.ceil(y1)) + 2, h),
    )


def crop_mask_kernels(crop_size: int, m: Matrix2x3, settings: MaskSettings) -> tuple[int, int]:
    """insightface's frame-space erosion and blur for this face, in crop pixels (x8 fixed point).

    insightface sizes both from sqrt(h*w) of the pasted square's axis-aligned bounding box in the
    frame, which grows with rotation; the same rule is applied here, then scaled into the crop.
    Returns (inset, sigma) as integers in 1/8 crop px so they can key a cache.
    """
    scale = crop_scale(m)
    cos_sin = np.abs(m[:, 0]) / max(scale, 1e-9)
    face_px = crop_size / max(scale, 1e-9) * float(cos_sin.sum())
    erode_px = max(int(face_px * settings.erode_ratio), settings.min_erode_px)
    blur_half = max(int(face_px * settings.blur_ratio), settings.min_blur_px)
    # OpenCV's sigma for a (2*half+1) Gaussian kernel with sigma=0.
    sigma_frame = 0.3 * (blur_half - 1) + 0.8
    # A k x k erosion moves each edge in by about k/2 px.
    inset = erode_px / 2.0 * scale
    sigma = sigma_frame * scale
    return int(round(inset * 8)), int(round(sigma * 8))


def build_crop_mask(crop_size: int, inset_x8: int, sigma_x8: int) -> MaskArray:
    """A white square inset by `inset` px and Gaussian-blurred with `sigma`, in [0,1]."""
    inset = inset_x8 / 8.0
    sigma = sigma_x8 / 8.0
    # Area coverage of each pixel by the inset square gives sub-pixel-exact edges.
    coords = np.arange(crop_size, dtype=np.float32)
    lo, hi = inset, crop_size - inset
    cover = np.clip(np.minimum(coords + 1.0, hi) - np.maximum(coords, lo), 0.0, 1.0)
    mask = np.outer(cover, cover).astype(np.float32)
    if sigma > 0.05:
        ksize = int(math.ceil(sigma * 3.0)) * 2 + 1
        mask = np.asarray(
            cv2.GaussianBlur(mask, (ksize, ksize), sigma, borderType=cv2.BORDER_CONSTANT), dtype=np.float32
        )
    return np.asarray(mask, dtype=np.float32)


def colour_transfer(crop: ImageBGR, reference: ImageBGR) -> ImageBGR:
    """Reinhard colour transfer in LAB: give `crop` the mean/std of `reference` (same size).

    Only the central part of both crops is measured so hair and background do not bias the skin.
    """
    c = crop.shape[0]
    lo, hi = c // 4, c - c // 4
    src = cv2.cvtColor(crop, cv2.COLOR_BGR2LAB).astype(np.float32)
    ref = cv2.cvtColor(reference, cv2.COLOR_BGR2LAB).astype(np.float32)
    s_c, r_c = src[lo:hi, lo:hi], ref[lo:hi, lo:hi]
    s_mean, s_std = s_c.mean(axis=(0, 1)), s_c.std(axis=(0, 1)) + 1e-3
    r_mean, r_std = r_c.mean(axis=(0, 1)), r_c.std(axis=(0, 1)) + 1e-3
    out = (src - s_mean) * (r_std / s_std) + r_mean
    lab = np.clip(out, 0, 255).astype(np.uint8)
    return np.asarray(cv2.cvtColor(lab, cv2.COLOR_LAB2BGR), dtype=np.uint8)


@dataclass
class Compositor:
    """Blends swapped crops into frames. Holds a small cache of crop-space masks (one per worker)."""

    settings: MaskSettings = field(default_factory=MaskSettings)
    max_cached_masks: int = 32
    _masks: OrderedDict[tuple[int, int, int], MaskArray] = field(default_factory=OrderedDict, repr=False)

    def crop_mask(self, crop_size: int, m: Matrix2x3) -> MaskArray:
        inset, sigma = crop_mask_kernels(crop_size, m, self.settings)
        key = (crop_size, inset, sigma)
        mask = self._masks.get(key)
        if mask is None:
            mask = build_crop_mask(crop_size, inset, sigma)
            self._masks[key] = mask
            if len(self._masks) > self.max_cached_masks:
                self._masks.popitem(last=False)
        else:
            self._masks.move_to_end(key)
        return mask

    def paste(
        self,
        frame: ImageBGR,
        crop: ImageBGR,
        m: Matrix2x3,
        *,
        colour_match: bool = False,
        opacity: float = 1.0,
        inplace: bool = False,
    ) -> ImageBGR:
        """Blend `crop` (aligned by `m`: frame -> crop) into `frame`; return the result.

        A new array unless `inplace`. Pixels outside `paste_region(...)` are never written.
        """
        out = frame if inplace else frame.copy()
        size = int(crop.shape[0])
        region = paste_region(frame.shape, size, m)
        if region.empty or opacity <= 0.0:
            return out
        if colour_match:
            target = cv2.warpAffine(frame, m, (size, size), borderValue=0.0)
            crop = colour_transfer(crop, np.asarray(target, dtype=np.uint8))
        roi_w, roi_h = region.x1 - region.x0, region.y1 - region.y0
        im_roi = invert_affine(m)
        im_roi[0, 2] -= region.x0
        im_roi[1, 2] -= region.y0
        fake = cv2.warpAffine(crop, im_roi, (roi_w, roi_h), borderValue=0.0)
        mask = self.crop_mask(size, m)
        if opacity < 1.0:
            mask = mask * np.float32(opacity)
        alpha = cv2.warpAffine(mask, im_roi, (roi_w, roi_h), borderValue=0.0)
        roi = out[region.y0 : region.y1, region.x0 : region.x1]
        # OpenCV's blend is ~20x faster than the same numpy float maths.
        roi[:] = cv2.blendLinear(fake, roi, alpha, 1.0 - alpha)
        return out


def paste_back(
    frame: ImageBGR,
    crop: ImageBGR,
    m: Matrix2x3,
    *,
    settings: MaskSettings = MaskSettings(),
    colour_match: bool = False,
    inplace: bool = False,
) -> ImageBGR:
    """One-off paste (tests, tools). The engine keeps a Compositor per worker for its mask cache."""
    return Compositor(settings).paste(frame, crop, m, colour_match=colour_match, inplace=inplace)
