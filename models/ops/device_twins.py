"""The device graphs' OpenCV twins: the CPU production path of models.ops.device_ops and the tests'
reference for the graphs (models.ops.device_graphs)."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, warp_paste_crop
from models.ops.crop_geometry import CropSpec, checked_affine
from models.ops.yuv import BT601_LIMITED, YuvColour, nv12_to_bgr_host
from models.types import FloatArray, ImageBGR


def warp_crop_cv2(
    frame: ImageBGR, m: Matrix2x3, spec: CropSpec, out: npt.NDArray[Any] | None = None
) -> npt.NDArray[Any]:
    """What the warp_crop graph computes, the OpenCV way: cv2.warpAffine to uint8, then the same
    channel order / scale / offset as InSwapper._load_target and ArcFace.embed_aligned_raw."""
    s = spec.size
    mat = checked_affine(m)
    if spec.replicate:
        crop = warp_paste_crop(frame, mat, s)
    else:
        crop = np.asarray(cv2.warpAffine(frame, mat, (s, s), borderValue=0.0), dtype=np.uint8)
    chw = (crop[:, :, ::-1] if spec.rgb else crop).transpose(2, 0, 1)
    dtype = np.float16 if spec.fp16 else np.float32
    dst = np.empty((1, 3, s, s), dtype=dtype) if out is None else out
    if spec.uniform and spec.offsets[0] == 0.0:
        np.multiply(chw, np.float32(spec.scales[0]), out=dst[0])
    else:
        scale = np.asarray(spec.scales, dtype=np.float32).reshape(3, 1, 1)
        offset = np.asarray(spec.offsets, dtype=np.float32).reshape(3, 1, 1)
        np.copyto(dst[0], chw * scale + offset, casting="same_kind")
    return dst


def nv12_to_bgr_cv2(nv12: npt.NDArray[np.uint8], colour: YuvColour = BT601_LIMITED) -> ImageBGR:
    """The graph's CPU twin: OpenCV for BT.601 limited range, else models.ops.yuv's float maths."""
    return nv12_to_bgr_host(nv12, colour)


def decode_crop(crop: npt.NDArray[Any]) -> ImageBGR:
    """[1,3,S,S] RGB in [0,1] -> (S,S,3) BGR uint8, truncating exactly like InSwapper._decode."""
    scaled = np.multiply(crop[0].transpose(1, 2, 0)[:, :, ::-1], np.float32(255.0), dtype=np.float32)
    return np.asarray(np.clip(scaled, 0.0, 255.0).astype(np.uint8))


def decode_signed_crop(crop: npt.NDArray[Any]) -> ImageBGR:
    """[1,3,S,S] RGB in [-1,1] -> (S,S,3) BGR uint8, rounding exactly like FaceRestorer._decode."""
    x = np.clip(crop[0].transpose(1, 2, 0)[:, :, ::-1].astype(np.float32), -1.0, 1.0)
    return np.asarray(np.rint((x + np.float32(1.0)) * np.float32(127.5)).astype(np.uint8))


def paste_blend_cv2(
    region: ImageBGR, crop: npt.NDArray[Any], mask: FloatArray, theta_inv: Matrix2x3, *, signed: bool = False
) -> ImageBGR:
    """What the paste_blend graph computes, as realtime.face.host.compositor.Compositor.paste does."""
    h, w = region.shape[:2]
    m = checked_affine(theta_inv)
    face = decode_signed_crop(crop) if signed else decode_crop(crop)
    fake = cv2.warpAffine(face, m, (w, h), borderValue=0.0)
    alpha = cv2.warpAffine(np.asarray(mask, dtype=np.float32), m, (w, h), borderValue=0.0)
    return np.asarray(cv2.blendLinear(fake, region, alpha, 1.0 - alpha), dtype=np.uint8)


__all__ = ["decode_crop", "decode_signed_crop", "nv12_to_bgr_cv2", "paste_blend_cv2", "warp_crop_cv2"]
