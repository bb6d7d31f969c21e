"""Where the swapped face may replace the frame: crop-space masks, combined by taking the minimum.

Every mask lives in the swap crop's aligned space (the swapper's crop: its template and size), so
the one warp the compositor already does takes the combined mask into the frame; nothing is
computed at frame size.

* box: the feathered square (realtime.face.host.compositor; always on, cached per kernel size);
* occlusion: xseg on the TARGET face (the frame, not the swap): hands, hair, a microphone in
  front of the face keep their own pixels;
* regions: BiSeNet's labels on the target face; only the classes in `masks.region_classes` count;
* mouth: a feathered polygon around the target's mouth corners; 1 - it keeps the target's mouth.

The mask models see the frame warped straight to their own input size with the same alignment
(`scale_crop_matrix`), sharper than the 128 px crop scaled up, and their output is resized back to
the crop. Combination is the elementwise minimum: each mask can only take pixels away.

The colour match measures the skin: the parser's skin class when it runs, else a fixed ellipse of
the aligned face (cheeks, nose, forehead); either way with the combined mask's holes cut out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, transform_points, warp_paste_crop
from models.ops.templates import CropLayout
from models.types import ImageBGR
from models.wrappers.maskers import FaceParser, Occluder
from realtime.core.settings import MasksSettings
from realtime.face.host.compositor import MaskArray, scale_crop_matrix

if TYPE_CHECKING:
    from realtime.face.backend import FaceBackend
    from realtime.face.chain import FaceJob, FrameJob

# FaceFusion resizes the xseg and BiSeNet masks to the 128 px swap crop, blurs them there with
# sigma 5, then keeps only the confident half (clip to [0.5, 1], rescale) (facefusion/
# face_masker.py). The same here, sigma 5 per 128 crop pixels, plus: never above the raw mask, so
# the soft edge stays on the face side and an occluder of any width keeps all its pixels.
SOFTEN_SIGMA = 5.0
SOFTEN_AT = 128  # the crop size SOFTEN_SIGMA is given for
MOUTH_POINTS = 24
SKIN_CLASS = 1

# The kept mouth area: past each corner by 20% of the mouth's width (corner to corner), down by
# half its width (the lower lip of an open mouth), up by half the way to the nose tip (the upper
# lip, never the nose: mouths are wide and noses close on some faces). The feather's sigma is
# 10% of the width, at most 20% of the way to the nose, so it fades out before the nose too.
MOUTH_HALF_WIDTH = 0.7
MOUTH_DOWN = 0.5
MOUTH_UP = 0.5
MOUTH_FEATHER = 0.1
MOUTH_FEATHER_NOSE = 0.2


@dataclass(frozen=True, slots=True)
class MouthFrame:
    """The mouth's own axes in crop pixels: centre, along the corners (u), away from the nose (n)."""

    centre: npt.NDArray[np.float64]
    u: npt.NDArray[np.float64]
    n: npt.NDArray[np.float64]
    width: float  # corner to corner
    to_nose: float  # from the corners' line to the nose tip, along n

    @staticmethod
    def of(kps_crop: npt.ArrayLike) -> MouthFrame:
        k = np.asarray(kps_crop, dtype=np.float64).reshape(5, 2)
        left, right, nose = k[3], k[4], k[2]
        centre = (left + right) / 2.0
        width = float(np.linalg.norm(right - left))
        if width < 1e-6:
            raise ValueError("mouth corners coincide")
        u = (right - left) / width
        n = np.array([-u[1], u[0]])
        if float(n @ (centre - nose)) < 0.0:
            n = -n
        # A landmark set with the nose on the mouth's line still gets a thin upper lip.
        to_nose = max(float(n @ (centre - nose)), 0.1 * width)
        return MouthFrame(centre, u, n, width, to_nose)


def soften(mask: MaskArray, sigma: float = SOFTEN_SIGMA, out: MaskArray | None = None) -> MaskArray:
    """Blur, then keep the confident half: (clip(blur(mask), 0.5, 1) - 0.5) * 2, in [0, 1], and
    never above the mask itself: a thin occluder (a pen, a cable, a glasses frame) blurs away to
    more than 0.5 and was swapped over (58 % of the swap on a 3 px bar)."""
    raw = mask.copy() if out is mask else mask
    dst = cv2.GaussianBlur(mask, (0, 0), sigma, dst=out, borderType=cv2.BORDER_REPLICATE)
    np.clip(dst, 0.5, 1.0, out=dst)
    np.subtract(dst, np.float32(0.5), out=dst)
    np.multiply(dst, np.float32(2.0), out=dst)
    np.minimum(dst, raw, out=dst)
    return np.asarray(dst, dtype=np.float32)


def mouth_polygon(
    kps_crop: npt.ArrayLike, scale: float = 1.0, points: int = MOUTH_POINTS
) -> npt.NDArray[np.float64]:
    """(points, 2) polygon around the mouth, from 5 landmarks in crop pixels.

    Two half-ellipses joined at the mouth corners' line (MouthFrame axes, so it follows head roll):
    point k at angle 2*pi*k/points from the `u` axis; the lower half reaches MOUTH_DOWN * width,
    the upper half MOUTH_UP * the distance to the nose; all scaled by `scale`.
    """
    f = MouthFrame.of(kps_crop)
    theta = np.arange(points, dtype=np.float64) * (2.0 * math.pi / points)
    sin = np.sin(theta)
    reach = np.where(sin >= 0.0, MOUTH_DOWN * f.width, MOUTH_UP * f.to_nose) * scale
    half_w = MOUTH_HALF_WIDTH * f.width * scale
    return f.centre + np.outer(np.cos(theta) * half_w, f.u) + np.outer(sin * reach, f.n)


def mouth_mask(
    kps_crop: npt.ArrayLike,
    size: int,
    scale: float = 1.0,
    *,
    out: MaskArray | None = None,
    raster: npt.NDArray[np.uint8] | None = None,
) -> MaskArray:
    """(size, size) float32, 1 on the target's mouth, feathered; `out`/`raster` are reusable buffers."""
    f = MouthFrame.of(kps_crop)
    poly = mouth_polygon(kps_crop, scale)
    buf = np.zeros((size, size), dtype=np.uint8) if raster is None else raster
    buf.fill(0)
    # 4 fractional bits: the polygon moves smoothly with sub-pixel landmark motion.
    pts = np.round(poly * 16.0).astype(np.int32).reshape(-1, 1, 2)
    cv2.fillPoly(buf, [pts], 255, lineType=cv2.LINE_AA, shift=4)
    dst = np.empty((size, size), dtype=np.float32) if out is None else out
    np.multiply(buf, np.float32(1.0 / 255.0), out=dst)
    sigma = min(MOUTH_FEATHER * f.width, MOUTH_FEATHER_NOSE * f.to_nose) * scale
    if sigma > 0.3:
        cv2.GaussianBlur(dst, (0, 0), sigma, dst=dst, borderType=cv2.BORDER_CONSTANT)
    return dst


def face_core_mask(crop: int | CropLayout) -> MaskArray:
    """The skin-measuring ellipse of an aligned face (no parser): centred between the eyes and the
    mouth, 0.9 eye distances wide and 0.8 eye-to-mouth heights tall on each side. `crop`: the
    swapper's crop layout (a size alone: inswapper's arcface_128 layout at that size)."""
    layout = crop if isinstance(crop, CropLayout) else CropLayout("arcface_128", crop)
    size = layout.size
    t = layout.points.astype(np.float64)
    eyes, mouth = t[:2].mean(axis=0), t[3:].mean(axis=0)
    centre = (eyes + mouth) / 2.0
    rx = 0.9 * float(np.linalg.norm(t[1] - t[0]))
    ry = 0.8 * float(mouth[1] - eyes[1])
    ys, xs = np.mgrid[:size, :size].astype(np.float64)
    inside = ((xs - centre[0]) / rx) ** 2 + ((ys - centre[1]) / ry) ** 2 <= 1.0
    return inside.astype(np.float32)


def combine_min(masks: Sequence[MaskArray], out: MaskArray) -> MaskArray:
    """Elementwise minimum of same-shape masks, into `out` (which may be one of them)."""
    if not masks:
        raise ValueError("no masks to combine")
    if out is not masks[0]:
        np.copyto(out, masks[0])
    for mask in masks[1:]:
        np.minimum(out, mask, out=out)
    return out


@dataclass(frozen=True, slots=True)
class FaceMask:
    """What the compositor and the colour match need for one face (buffers valid until the next face).

    alpha: where the swap replaces the frame (crop space, 0..1).
    skin: colour-measurement weights (crop space), or None when not asked for.
    """

    alpha: MaskArray
    skin: MaskArray | None


def _add_ms(timings: dict[str, float], key: str, t0: float) -> None:
    timings[key] = timings.get(key, 0.0) + (time.perf_counter() - t0) * 1000.0


class FaceMasks:
    """Builds one face's combined mask; one per worker (reused buffers, its own mask models).

    occluder / parser: the loaded models, or None while the settings do not ask for them.
    """

    def __init__(
        self, crop: int | CropLayout, occluder: Occluder | None = None, parser: FaceParser | None = None
    ) -> None:
        layout = crop if isinstance(crop, CropLayout) else CropLayout("arcface_128", crop)
        self.crop_size = layout.size
        self.occluder = occluder
        self.parser = parser
        s = layout.size
        self._alpha: MaskArray = np.zeros((s, s), dtype=np.float32)
        self._skin: MaskArray = np.zeros((s, s), dtype=np.float32)
        self._part: MaskArray = np.zeros((s, s), dtype=np.float32)
        self._raster: npt.NDArray[np.uint8] = np.zeros((s, s), dtype=np.uint8)
        self._core: MaskArray = face_core_mask(layout)
        self._occ_crop: ImageBGR | None = None
        self._parse_crop: ImageBGR | None = None
        self._big: MaskArray | None = None
        self._best: MaskArray | None = None

    def build(
        self,
        frame: ImageBGR,
        m: Matrix2x3,
        kps: npt.ArrayLike,
        box: MaskArray,
        settings: MasksSettings,
        timings: dict[str, float],
        *,
        want_skin: bool = False,
    ) -> FaceMask:
        """The face's mask: min(box, occlusion, regions, 1 - mouth) for the masks switched on.

        frame/m: the frame and its frame -> crop matrix; kps: the face's landmarks (frame pixels);
        box: the feathered box for this crop (shared, never written). Adds each mask's ms to
        `timings` under "mask.occlusion", "mask.regions", "mask.mouth".
        """
        s = self.crop_size
        extra = settings.occlusion or settings.regions or settings.mouth
        skin_from_parser = False
        if not extra and not want_skin:
            return FaceMask(box, None)  # the default path: nothing to compute, nothing copied
        alpha = self._alpha
        np.copyto(alpha, box)
        if settings.occlusion:
            t0 = time.perf_counter()
            np.minimum(alpha, self._occlusion(frame, m), out=alpha)
            _add_ms(timings, "mask.occlusion", t0)
        if settings.regions:
            t0 = time.perf_counter()
            np.minimum(alpha, self._regions(frame, m, settings.region_classes, want_skin), out=alpha)
            skin_from_parser = want_skin
            _add_ms(timings, "mask.regions", t0)
        if settings.mouth:
            t0 = time.perf_counter()
            kps_crop = transform_points(kps, m)
            mouth = mouth_mask(kps_crop, s, settings.mouth_scale, out=self._part, raster=self._raster)
            np.subtract(np.float32(1.0), mouth, out=mouth)
            np.minimum(alpha, mouth, out=alpha)
            _add_ms(timings, "mask.mouth", t0)
        if not want_skin:
            return FaceMask(alpha, None)
        if not skin_from_parser:
            np.copyto(self._skin, self._core)
        np.minimum(self._skin, alpha, out=self._skin)
        return FaceMask(alpha, self._skin)

    def _occlusion(self, frame: ImageBGR, m: Matrix2x3) -> MaskArray:
        if self.occluder is None:
            raise RuntimeError("masks.occlusion is on but no occluder model is loaded")
        size = self.occluder.size
        if self._occ_crop is None:
            self._occ_crop = np.zeros((size, size, 3), dtype=np.uint8)
        warp_paste_crop(frame, scale_crop_matrix(m, size / self.crop_size), size, out=self._occ_crop)
        visible = self.occluder.mask(self._occ_crop)
        cv2.resize(visible, (self.crop_size, self.crop_size), dst=self._part, interpolation=cv2.INTER_AREA)
        return soften(self._part, SOFTEN_SIGMA * self.crop_size / SOFTEN_AT, out=self._part)

    def _regions(self, frame: ImageBGR, m: Matrix2x3, classes: tuple[int, ...], want_skin: bool) -> MaskArray:
        if self.parser is None:
            raise RuntimeError("masks.regions is on but no face-parser model is loaded")
        size = self.parser.size
        if self._parse_crop is None or self._big is None or self._best is None:
            self._parse_crop = np.zeros((size, size, 3), dtype=np.uint8)
            self._big = np.zeros((size, size), dtype=np.float32)
            self._best = np.zeros((size, size), dtype=np.float32)
        warp_paste_crop(frame, scale_crop_matrix(m, size / self.crop_size), size, out=self._parse_crop)
        logits = self.parser.logits(self._parse_crop)
        best = region_argmax_max(logits, out=self._best)
        crop = (self.crop_size, self.crop_size)
        if want_skin:
            # Skin only, no softening: these are measurement weights, not an edge.
            np.greater_equal(logits[SKIN_CLASS], best, out=self._big, casting="unsafe")
            cv2.resize(self._big, crop, dst=self._skin, interpolation=cv2.INTER_AREA)
        classes_mask(logits, classes, best, out=self._big)
        cv2.resize(self._big, crop, dst=self._part, interpolation=cv2.INTER_AREA)
        return soften(self._part, SOFTEN_SIGMA * self.crop_size / SOFTEN_AT, out=self._part)


class MaskStep:
    """The face's paste mask from the feathered box and the masks switched on (both backends:
    the mask models read the host frame, which still holds the original picture)."""

    name = "masks"

    def __init__(self, masks: FaceMasks) -> None:
        self.masks = masks

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        crop = face.crop
        box = frame.compositor.crop_mask(self.masks.crop_size, crop.m)
        built = self.masks.build(
            frame.image,
            crop.m,
            face.target.kps,
            box,
            frame.masks,
            frame.timings,
            want_skin=frame.settings.composite.colour_match,
        )
        crop.mask = built.alpha
        face.skin = built.skin


def region_argmax_max(logits: MaskArray, out: MaskArray | None = None) -> MaskArray:
    """The largest logit per pixel (what the argmax label's logit is), over the class axis 0."""
    return np.asarray(np.max(logits, axis=0, out=out), dtype=np.float32)


def classes_mask(
    logits: MaskArray, classes: Sequence[int], best: MaskArray, out: MaskArray | None = None
) -> MaskArray:
    """1.0 where the argmax label is one of `classes`, else 0.0 (float32).

    Computed as max(logits[classes]) >= max(all logits) rather than with np.argmax: argmax along
    the class axis of a (19, 512, 512) array walks memory with a 1 MB stride, an order of magnitude
    slower than 19 + len(classes) contiguous np.maximum passes (docs/PERFORMANCE.md). They differ only on
    exact ties between a listed and an unlisted class, which float logits practically never have.
    """
    first, *rest = classes
    sel = np.array(logits[first], dtype=np.float32, copy=True) if out is None else out
    if out is not None:
        np.copyto(sel, logits[first])
    for k in rest:
        np.maximum(sel, logits[k], out=sel)
    np.greater_equal(sel, best, out=sel, casting="unsafe")
    return sel


__all__ = [
    "FaceMask",
    "FaceMasks",
    "MaskStep",
    "MouthFrame",
    "classes_mask",
    "combine_min",
    "face_core_mask",
    "mouth_mask",
    "mouth_polygon",
    "soften",
]
