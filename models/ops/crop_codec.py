"""A face model's crop to its input tensor and its output tensor back to a crop, on the host.

encode   uint8 BGR (S, S, 3) -> [1,3,S,S] in the model's order and normalisation (a CropSpec:
         channel order, per-channel scale and offset), float32 or float16 as the input declares
decode   [1,3,S,S] RGB back to uint8 BGR, from one of the two output ranges the face models use:
           unit    [0, 1]: x 255, clipped, truncated (insightface's np.clip(255 x).astype(uint8))
           signed  [-1, 1]: clipped, (x + 1) x 127.5, rounded (FaceFusion's restorer decode)

One codec per model wrapper instance: it owns the scratch buffers, so nothing is allocated per
face. The device graphs do the same maths on the GPU (models.ops.device_graphs, device_twins).
"""

from __future__ import annotations

from typing import Any, Literal

import cv2
import numpy as np
import numpy.typing as npt

from models.ops.crop_geometry import CropSpec
from models.types import FloatArray, ImageBGR

OutputRange = Literal["unit", "signed"]


class CropCodec:
    """Encoder and decoder for one crop size and normalisation (module doc)."""

    def __init__(self, spec: CropSpec) -> None:
        s = spec.size
        self.spec = spec
        self._scale = np.asarray(spec.scales, dtype=np.float32).reshape(3, 1, 1)
        self._offset = np.asarray(spec.offsets, dtype=np.float32).reshape(3, 1, 1)
        self._no_offset = spec.offsets == (0.0, 0.0, 0.0)
        # inswapper's case (RGB, one scale, no offset) has a compiled one-pass kernel.
        self._planes_kernel = spec.rgb and spec.uniform and self._no_offset
        self._chw: FloatArray = np.empty((3, s, s), dtype=np.float32)
        self._hwc: FloatArray = np.empty((s, s, 3), dtype=np.float32)
        self._planes_u8 = [np.empty((s, s), dtype=np.uint8) for _ in range(3)]
        self._plane_f32: FloatArray = np.empty((s, s), dtype=np.float32)

    @property
    def size(self) -> int:
        return self.spec.size

    def encode(self, crop_bgr: ImageBGR, out: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """`crop_bgr` into `out` ([1,3,S,S] float32 or float16, or a [3,S,S] row of a batch)."""
        s = self.spec.size
        if crop_bgr.shape != (s, s, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(f"expected a ({s}, {s}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}")
        dst = out.reshape(3, s, s)
        if self._planes_kernel and dst.dtype == np.float32 and dst.flags.c_contiguous:
            # Imported here: numba (1.3 s, ~200 MB) loads only where the CPU path runs this.
            from models.ops.pixel_kernels import bgr_into_rgb_planes

            bgr_into_rgb_planes(crop_bgr, dst.reshape(1, 3, s, s), self.spec.scales[0])
            return out
        chw = (crop_bgr[:, :, ::-1] if self.spec.rgb else crop_bgr).transpose(2, 0, 1)
        work = dst if dst.dtype == np.float32 else self._chw
        np.multiply(chw, self._scale, out=work)
        if not self._no_offset:
            np.add(work, self._offset, out=work)
        if work is not dst:
            np.copyto(dst, work, casting="same_kind")
        return out

    def decode(
        self, pred: npt.NDArray[Any], out: ImageBGR | None, output: OutputRange
    ) -> tuple[ImageBGR, bool]:
        """The crop in `pred` ([1,3,S,S] or [3,S,S] RGB) as uint8 BGR, in `out` when given; False
        (with `out` unspecified) where `pred` holds NaN or an infinity."""
        s = self.spec.size
        dst = np.empty((s, s, 3), dtype=np.uint8) if out is None else out
        if dst.shape != (s, s, 3) or dst.dtype != np.uint8:
            raise ValueError(f"out must be a ({s}, {s}, 3) uint8 array")
        planes = pred.reshape(3, s, s)
        if output == "signed":
            return dst, self._decode_signed(planes, dst)
        return dst, self._decode_unit(planes, dst)

    def _decode_unit(self, planes: npt.NDArray[Any], dst: ImageBGR) -> bool:
        s = self.spec.size
        if planes.dtype == np.float32 and planes.flags.c_contiguous:
            # One pass without the GIL; the same values as the numpy steps below.
            from models.ops.pixel_kernels import rgb_planes_into_bgr

            return rgb_planes_into_bgr(planes.reshape(1, 3, s, s), dst, 255.0)
        if not np.isfinite(planes).all():
            return False
        # NCHW RGB -> HWC BGR, x255 in float32 (also for a float16 output), clip, truncate to uint8
        # like insightface's np.clip(255 * x, 0, 255).astype(np.uint8); plane by plane.
        scratch = self._plane_f32
        for channel, plane in zip((2, 1, 0), self._planes_u8, strict=True):  # B, G, R
            np.multiply(planes[channel], np.float32(255.0), out=scratch)
            np.clip(scratch, 0.0, 255.0, out=scratch)
            np.copyto(plane, scratch, casting="unsafe")
        if dst.flags.c_contiguous:
            merged = cv2.merge(self._planes_u8, dst=dst)
            if merged is not dst:  # OpenCV allocated instead of writing into `out`
                np.copyto(dst, merged)
        else:  # cv2 refuses some layouts (Fortran order) as dst: merge, then copy
            np.copyto(dst, cv2.merge(self._planes_u8))
        return True

    def _decode_signed(self, planes: npt.NDArray[Any], dst: ImageBGR) -> bool:
        # FaceFusion's normalisation: clip to [-1, 1], (x + 1)/2 * 255, round; RGB -> BGR.
        work = self._hwc
        np.copyto(work, planes.transpose(1, 2, 0)[:, :, ::-1], casting="same_kind")
        if not np.isfinite(work).all():
            return False
        np.clip(work, -1.0, 1.0, out=work)
        np.add(work, np.float32(1.0), out=work)
        np.multiply(work, np.float32(127.5), out=work)
        np.rint(work, out=work)
        np.copyto(dst, work, casting="unsafe")
        return True


__all__ = ["CropCodec", "OutputRange"]
