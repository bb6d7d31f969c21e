"""Paste a swapped face crop back into the frame — only inside the face's region.

insightface warps the crop, a white mask and a diff image over the WHOLE frame and erodes and
blurs a frame-sized mask, tens of ms a frame on a CPU (docs/PERFORMANCE.md). Here the feathered mask
is made once in crop space (erosion and blur scaled to the face, as insightface scales them in
frame space) and cached; per frame only the crop and its mask are warped into the face's bounding
region and blended there. Every pixel outside that region is left exactly as it came in.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, invert_affine, warp_paste_crop
from models.types import Box, ImageBGR
from realtime.face.host.colour import colour_transfer

MaskArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class MaskSettings:
    """Feathering of the pasted face, as fractions of the face's size (insightface: 1/10, 1/20)."""

    erode_ratio: float = 0.1
    blur_ratio: float = 0.05
    min_erode_px: int = 10
    min_blur_px: int = 5


Region = Box  # a rectangle of the frame (models.types.Box; the device ops share it)


def compose_affine(outer: Matrix2x3, inner: Matrix2x3) -> Matrix2x3:
    """outer ∘ inner: the 2x3 matrix that applies `inner` first, then `outer`."""
    m = np.empty((2, 3), dtype=np.float64)
    m[:, :2] = outer[:, :2] @ inner[:, :2]
    m[:, 2] = outer[:, :2] @ inner[:, 2] + outer[:, 2]
    return m


def scale_crop_matrix(m: Matrix2x3, factor: float) -> Matrix2x3:
    """The same aligned crop at `factor` times the resolution.

    Pixel centres stay put (x' = f*x + (f-1)/2, OpenCV's resize convention), so a model output at
    the larger size resized back with cv2.resize lines up with the original crop exactly.
    """
    scale = np.array([[factor, 0.0, (factor - 1.0) / 2.0], [0.0, factor, (factor - 1.0) / 2.0]])
    return compose_affine(scale, m)


def paste_region(frame_shape: tuple[int, ...], crop_size: int, m: Matrix2x3) -> Region:
    """The part of the frame the pasted crop can touch (its warped corners' bounding box)."""
    # In Python scalars (four corners: numpy's per-call cost is most of the time).
    (a, b, tx), (c, d, ty) = invert_affine(m).tolist()
    s = float(crop_size)
    xs = (tx, a * s + tx, b * s + tx, a * s + b * s + tx)
    ys = (ty, c * s + ty, d * s + ty, c * s + d * s + ty)
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
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
    (a, b, _), (c, d, _) = m.tolist()
    scale = math.sqrt(abs(a * d - b * c))  # crop px per frame px (the 2x2 determinant's root)
    # |cos| + |sin| of the rotation: how much wider the rotated square's bounding box is.
    face_px = crop_size / max(scale, 1e-9) * (abs(a) / max(scale, 1e-9) + abs(c) / max(scale, 1e-9))
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
        # A wide blur (blur_ratio 0.1 and up) leaves the feather at 22-96/255 at the crop's border,
        # where it drops to 0: a hard box round the face. Lowered so it ends at 0 there, its
        # shape kept (moving the edge inwards instead shrinks the swapped area by half). The
        # defaults leave at most ~2/255 there and are not touched.
        edge = float(max(mask[0].max(), mask[-1].max(), mask[:, 0].max(), mask[:, -1].max()))
        if edge > _FEATHER_EDGE_MAX:
            mask = np.clip((mask - edge) / (1.0 - edge), 0.0, 1.0).astype(np.float32)
    return np.asarray(mask, dtype=np.float32)


_FEATHER_EDGE_MAX = 2.5 / 255.0


class _Scratch:
    """Grow-only flat buffers handed out as contiguous arrays of any shape (per-frame ROIs vary)."""

    def __init__(self) -> None:
        self._bufs: dict[tuple[str, np.dtype[Any]], npt.NDArray[Any]] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
        key = (name, np.dtype(dtype))
        n = math.prod(shape)
        buf = self._bufs.get(key)
        if buf is None or buf.size < n:
            buf = self._bufs[key] = np.empty(max(n, 1), dtype=dtype)
        return buf[:n].reshape(shape)


def mask_to_u8(mask: MaskArray, out: npt.NDArray[np.uint8] | None = None) -> npt.NDArray[np.uint8]:
    """A 0..1 float mask as 0..255 uint8, rounded (the alpha channel of the paste warp)."""
    dst = np.empty(mask.shape, dtype=np.uint8) if out is None else out
    # convertScaleAbs rounds and saturates in one SIMD pass (the mask is never negative).
    cv2.convertScaleAbs(mask, dst=dst, alpha=255.0)
    return dst


@dataclass
class Compositor:
    """Blends swapped crops into frames. Holds a small cache of crop-space masks and the scratch
    buffers of the blend (one compositor per worker: not thread-safe)."""

    settings: MaskSettings = field(default_factory=MaskSettings)
    max_cached_masks: int = 32
    _masks: OrderedDict[tuple[int, int, int], MaskArray] = field(default_factory=OrderedDict, repr=False)
    _alphas: dict[int, npt.NDArray[np.uint8]] = field(default_factory=dict, repr=False)  # by cached mask id
    _scratch: _Scratch = field(default_factory=_Scratch, repr=False)

    def crop_mask(self, crop_size: int, m: Matrix2x3) -> MaskArray:
        inset, sigma = crop_mask_kernels(crop_size, m, self.settings)
        key = (crop_size, inset, sigma)
        mask = self._masks.get(key)
        if mask is None:
            mask = build_crop_mask(crop_size, inset, sigma)
            mask.flags.writeable = False  # shared: the u8 twin below is keyed by its identity
            self._masks[key] = mask
            if len(self._masks) > self.max_cached_masks:
                _, dropped = self._masks.popitem(last=False)
                self._alphas.pop(id(dropped), None)
        else:
            self._masks.move_to_end(key)
        return mask

    def _crop_alpha(self, mask: MaskArray, size: int) -> npt.NDArray[np.uint8]:
        """The mask as uint8: cached for the compositor's own masks, converted into scratch for any
        other."""
        cached = self._alphas.get(id(mask))
        if cached is not None:
            return cached
        if any(v is mask for v in self._masks.values()):
            cached = self._alphas[id(mask)] = mask_to_u8(mask)
            return cached
        return mask_to_u8(mask, out=self._scratch.get("alpha_crop", (size, size), np.uint8))

    def paste(
        self,
        frame: ImageBGR,
        crop: ImageBGR,
        m: Matrix2x3,
        *,
        colour_match: bool = False,
        opacity: float = 1.0,
        inplace: bool = False,
        mask: MaskArray | None = None,
        region: Region | None = None,
    ) -> ImageBGR:
        """Blend `crop` (aligned by `m`: frame -> crop) into `frame`; return the result.

        A new array unless `inplace`. Pixels outside `paste_region(...)` are never written, and
        pixels where the warped mask is 0 keep their exact values.
        `mask`: the crop-space alpha to use (e.g. realtime.face.steps.masks' combined mask) instead of the
        cached feathered box. `region`: a smaller part of the frame to limit the blend to, when the
        mask is known to be zero beyond it (the enhancer's crop is larger than the face it pastes).
        """
        out = frame if inplace else frame.copy()
        size = int(crop.shape[0])
        full = paste_region(frame.shape, size, m)
        region = full if region is None else full.intersect(region)
        if region.empty or opacity <= 0.0:
            return out
        if colour_match:
            crop = colour_transfer(crop, warp_paste_crop(frame, m, size))
        if mask is None:
            mask = self.crop_mask(size, m)
        elif mask.shape != (size, size):
            raise ValueError(f"mask {mask.shape} does not match the crop ({size}, {size})")
        roi_w, roi_h = region.x1 - region.x0, region.y1 - region.y0
        im_roi = invert_affine(m)
        im_roi[0, 2] -= region.x0
        im_roi[1, 2] -= region.y0

        # One 4-channel uint8 warp carries the face and its alpha together: OpenCV's fixed-point
        # 8-bit warp is the cheapest it has, and one warp instead of two halves the paste's cost.
        scratch = self._scratch
        bgra = scratch.get("crop_bgra", (size, size, 4), np.uint8)
        cv2.merge((crop, self._crop_alpha(mask, size)), dst=bgra)
        warped = scratch.get("roi_bgra", (roi_h, roi_w, 4), np.uint8)
        cv2.warpAffine(bgra, im_roi, (roi_w, roi_h), dst=warped, borderValue=0.0)
        # One compiled pass: skips the pixels outside the mask, copies the opaque core, blends the
        # feathered edge (OpenCV needed five passes with float temporaries for the edge alone).
        # Imported here: numba (1.3 s, ~200 MB) loads only where the host path pastes.
        from models.ops.pixel_kernels import blend_bgra_into

        blend_bgra_into(warped, out[region.y0 : region.y1, region.x0 : region.x1], opacity)
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
