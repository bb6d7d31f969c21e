"""Which YUV -> RGB conversion a video needs (matrix and range), and its host (CPU) twin.

NVDEC hands out the stream's own code values; turning them into BGR needs the stream's colour
matrix (BT.601 for SD and untagged video, BT.709 for most HD) and range (limited 16-235, or full
0-255 for `yuvj` / JPEG-range video). PyAV's CPU decoding honours both, so the GPU path must too,
or the same file looks different depending on where it was decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from models.types import ImageBGR

# FFmpeg's AVColorSpace / AVColorRange numbers (libavutil/pixfmt.h), as PyAV reports them.
AVCOL_SPC_BT709 = 1
AVCOL_SPC_SMPTE170M = 6  # BT.601 (525-line): the matrix OpenCV's and swscale's defaults use
AVCOL_RANGE_MPEG = 1  # limited range, 16-235
AVCOL_RANGE_JPEG = 2

# Luma and blue/red weights of the two matrices (ITU-R BT.601 and BT.709).
_WEIGHTS = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


@dataclass(frozen=True, slots=True)
class YuvColour:
    matrix: Literal["bt601", "bt709"] = "bt601"
    full_range: bool = False

    @property
    def is_opencv(self) -> bool:
        """OpenCV's NV12 conversion (BT.601, limited range) is this one: its fast path applies."""
        return self.matrix == "bt601" and not self.full_range

    def coefficients(self) -> tuple[float, float, npt.NDArray[np.float64]]:
        """(luma gain, luma black level, chroma matrix): B, G, R rows x (U - 128, V - 128) columns.

        BGR = gain * (Y - black) + matrix @ (U - 128, V - 128).
        """
        kr, kb = _WEIGHTS[self.matrix]
        kg = 1.0 - kr - kb
        rows = np.array(
            [
                [2.0 * (1.0 - kb), 0.0],
                [-2.0 * kb * (1.0 - kb) / kg, -2.0 * kr * (1.0 - kr) / kg],
                [0.0, 2.0 * (1.0 - kr)],
            ]
        )
        if self.full_range:
            return 1.0, 0.0, rows
        return 255.0 / 219.0, 16.0, rows * (255.0 / 224.0)

    def __str__(self) -> str:
        return f"{self.matrix.upper().replace('BT', 'BT.')} {'full' if self.full_range else 'limited'} range"


BT601_LIMITED = YuvColour()


def colour_of(colorspace: int | None, color_range: int | None, pix_fmt: str | None) -> YuvColour:
    """The conversion FFmpeg's own (swscale) would use for a stream with these tags: BT.709 when
    tagged so, else BT.601 (its default, also for untagged video); full range for JPEG-range
    tags and `yuvj` pixel formats."""
    matrix: Literal["bt601", "bt709"] = "bt709" if colorspace == AVCOL_SPC_BT709 else "bt601"
    full = color_range == AVCOL_RANGE_JPEG or bool(pix_fmt and pix_fmt.startswith("yuvj"))
    return YuvColour(matrix, full)


def nv12_to_bgr_host(
    nv12: npt.NDArray[np.uint8], colour: YuvColour = BT601_LIMITED, out: ImageBGR | None = None
) -> ImageBGR:
    """NV12 [3h/2, w] uint8 -> BGR [h, w, 3] uint8 on the CPU, through OpenCV.

    BT.601 limited is OpenCV's own conversion (COLOR_YUV2BGR_NV12 has no other matrix or range).
    Any other colour: chroma upsampled by nearest neighbour (as OpenCV does), limited-range luma
    clamped below at 16, then one cv2.transform with the colour's matrix and offsets, rounded and
    saturated by OpenCV: within one level of `nv12_to_bgr_reference` (ties round to even there),
    at a tenth of its time (docs/PERFORMANCE.md).
    """
    rows, width = int(nv12.shape[0]), int(nv12.shape[1])
    height = rows * 2 // 3
    dst = np.empty((height, width, 3), dtype=np.uint8) if out is None else out
    if colour.is_opencv:
        cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12, dst=dst)
        return dst
    gain, black, matrix = colour.coefficients()
    luma = nv12[:height]
    if black:
        luma = np.maximum(luma, np.uint8(black))
    uv = nv12[height:].reshape(height // 2, width // 2, 2)
    u, v = cv2.split(cv2.resize(uv, (width, height), interpolation=cv2.INTER_NEAREST))
    yuv = cv2.merge((luma, u, v))
    # BGR = gain * Y + matrix @ (U, V) + (-gain * black - 128 * row sums): one affine map per pixel.
    affine = np.zeros((3, 4), dtype=np.float64)
    affine[:, 0] = gain
    affine[:, 1:3] = matrix
    affine[:, 3] = -gain * black - 128.0 * matrix.sum(axis=1)
    cv2.transform(yuv, affine, dst=dst)
    return dst


def nv12_to_bgr_reference(
    nv12: npt.NDArray[np.uint8], colour: YuvColour = BT601_LIMITED, out: ImageBGR | None = None
) -> ImageBGR:
    """The numpy twin of `nv12_to_bgr_host`, kept as the tests' reference: the float maths of the
    device graph (models.ops.device_ops.build_nv12_to_bgr), chroma upsampled by nearest neighbour
    like OpenCV, limited-range luma clamped below at 16 like OpenCV, rounded half up and saturated."""
    rows, width = int(nv12.shape[0]), int(nv12.shape[1])
    height = rows * 2 // 3
    dst = np.empty((height, width, 3), dtype=np.uint8) if out is None else out
    if colour.is_opencv:
        cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12, dst=dst)
        return dst
    gain, black, matrix = colour.coefficients()
    y = nv12[:height].astype(np.float32)
    if black:
        np.maximum(y, np.float32(black), out=y)
    luma = (y - np.float32(black)) * np.float32(gain)
    uv = nv12[height:].reshape(height // 2, width // 2, 2).astype(np.float32) - np.float32(128.0)
    chroma = uv @ matrix.T.astype(np.float32)  # [h/2, w/2, 3] in B, G, R order
    full = np.repeat(np.repeat(chroma, 2, axis=0), 2, axis=1)
    bgr = full + luma[:, :, None] + np.float32(0.5)
    np.clip(bgr, 0.0, 255.0, out=bgr)
    dst[...] = bgr.astype(np.uint8)  # truncation of x + 1/2: round half up
    return dst
