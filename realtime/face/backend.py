"""Where a swap worker's frame and face crops live while the per-face chain runs.

The chain (realtime.face.chain, run by realtime.face.swap_worker.FaceSwapWorker) is written once
against `FaceBackend`; a backend supplies the few operations that depend on where the pixels are:

    crop / swap     the swapper's aligned input and its output for one face
    pixels          a face crop as uint8 BGR on the host, edited in place by the host steps
                    (colour match, sharpening, cross-fade); the edits are what gets pasted
    reference       the frame's own face under a crop (what the colour match measures against)
    enhance         the restorer on one swapped face, giving the crop to paste instead
    paste           a finished crop into the frame, through its crop-space mask

`HostBackend` is the OpenCV/numpy implementation (the CPU production path); the device
implementation (ONNX Runtime graphs with IOBinding) is realtime.face.device_backend.DeviceBackend.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, warp_paste_crop
from models.types import ImageBGR
from models.wrappers.swappers.base import FaceSwapper
from realtime.face.host.compositor import Compositor, MaskArray, Region, paste_region
from realtime.face.host.enhancer import FaceEnhanceStage


@dataclass(slots=True)
class FaceCrop:
    """One face's crop on its way to the paste (buffers are the backend's: valid until its next face).

    m: frame -> crop. mask: the crop-space paste alpha (set by the mask step; the enhancer's output
    carries its own). host: the uint8 BGR pixels on the host (always on the host backend; on the
    device once fetched). value: the device tensor (device backend only). signed: a restorer's
    output ([-1, 1]) rather than the swapper's ([0, 1]). needs_host: it must make a host round trip
    before the paste (a float16 output). region: a part of the frame the mask is zero beyond.
    strength: the share of the paste's opacity it is pasted at. placed: already in the frame.
    """

    m: Matrix2x3
    host: ImageBGR | None = None
    value: Any = None
    mask: MaskArray | None = None
    signed: bool = False
    needs_host: bool = False
    region: Region | None = None
    strength: float = 1.0
    placed: bool = False


class FaceBackend(Protocol):
    """The operations of the per-face chain that depend on where the pixels live (module doc)."""

    def begin(
        self, image: ImageBGR, timings: dict[str, float], compositor: Compositor, picture: object | None
    ) -> None:
        """Start a frame: `image` is the host frame, swapped in place by the time `end` returns."""
        ...

    def crop(self, m: Matrix2x3) -> None:
        """Crop the swapper's input for the face aligned by `m` (frame -> crop)."""
        ...

    def swap(self, identity: int, *, spare: bool = False) -> FaceCrop:
        """The swapper's output for the cropped face with source identity `identity`. spare: into a
        second buffer, kept while the next `swap` runs (a face cross-fading between identities)."""
        ...

    def pixels(self, face: FaceCrop) -> ImageBGR:
        """`face` as uint8 BGR on the host, edited in place by the caller; the edits are pasted."""
        ...

    def reference(self, face: FaceCrop) -> ImageBGR:
        """The frame's own pixels under `face`'s crop, uint8 BGR on the host (read only)."""
        ...

    def enhance(
        self,
        stage: FaceEnhanceStage,
        face: FaceCrop,
        kps: npt.ArrayLike,
        *,
        opacity: float,
        blend: float,
        every_n: int,
        key: Hashable | None,
    ) -> tuple[FaceCrop, bool]:
        """The restorer on swapped `face` (pasted at `opacity`): the crop to paste instead and
        whether the model ran (False: a kept correction was reused, see steps/enhance.py)."""
        ...

    def paste(self, face: FaceCrop, opacity: float) -> None:
        """Blend `face` into the frame at `opacity` x face.strength, through face.mask."""
        ...

    def end(self, keys: Collection[Hashable], stage: FaceEnhanceStage | None) -> None:
        """Finish the frame: the faces' kept enhancer corrections other than `keys` are dropped."""
        ...


class HostBackend:
    """The chain on the host: OpenCV warps, the swapper on numpy crops, the compositor's paste."""

    def __init__(self, swapper: FaceSwapper, latents: Sequence[npt.NDArray[np.float32]]) -> None:
        self._swapper = swapper
        self._latents = tuple(latents)
        size = swapper.input_size
        self._size = size
        self._crop = np.zeros((size, size, 3), dtype=np.uint8)  # reused every face
        self._swapped = np.zeros((size, size, 3), dtype=np.uint8)
        self._swapped_before = np.zeros((size, size, 3), dtype=np.uint8)  # a face changing identity
        self._m: Matrix2x3 = np.eye(2, 3)
        self._image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)
        self._compositor = Compositor()

    def begin(
        self, image: ImageBGR, timings: dict[str, float], compositor: Compositor, picture: object | None
    ) -> None:
        self._image = image
        self._compositor = compositor

    def crop(self, m: Matrix2x3) -> None:
        self._m = m
        warp_paste_crop(self._image, m, self._size, out=self._crop)

    def swap(self, identity: int, *, spare: bool = False) -> FaceCrop:
        out = self._swapped_before if spare else self._swapped
        return FaceCrop(self._m, host=self._swapper.swap(self._crop, self._latents[identity], out=out))

    def pixels(self, face: FaceCrop) -> ImageBGR:
        assert face.host is not None, "a host crop always has its pixels"
        return face.host

    def reference(self, face: FaceCrop) -> ImageBGR:
        # The swap crop's own input: the frame as it was under this face.
        return self._crop

    def enhance(
        self,
        stage: FaceEnhanceStage,
        face: FaceCrop,
        kps: npt.ArrayLike,
        *,
        opacity: float,
        blend: float,
        every_n: int,
        key: Hashable | None,
    ) -> tuple[FaceCrop, bool]:
        assert face.mask is not None, "the mask step runs before the enhancer"
        done = stage.enhance(
            self._image, kps, self.pixels(face), face.m, face.mask, blend=blend, every_n=every_n, key=key
        )
        # The FFHQ crop is larger than the face; the mask is zero beyond the swap's square.
        region = paste_region(self._image.shape, self._size, face.m)
        return FaceCrop(done.m, host=done.crop, mask=done.mask, region=region), done.ran_model

    def paste(self, face: FaceCrop, opacity: float) -> None:
        self._compositor.paste(
            self._image,
            self.pixels(face),
            face.m,
            opacity=opacity * face.strength,
            inplace=True,
            mask=face.mask,
            region=face.region,
        )
        face.placed = True

    def end(self, keys: Collection[Hashable], stage: FaceEnhanceStage | None) -> None:
        if stage is not None:
            stage.forget_except(keys)


__all__ = ["FaceBackend", "FaceCrop", "HostBackend"]
