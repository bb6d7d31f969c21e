"""Where a swap worker's frame and face crops live while the per-face chain runs.

The chain (realtime.face.chain, run by realtime.face.swap_worker.FaceSwapWorker) is written once
against `FaceBackend`; a backend supplies the few operations that depend on where the pixels are:

    submit          a face's aligned crop, in a slot of its own for the frame, handed to the
                    swapper's inference service (every face of the frame is submitted before any
                    result is read, so they, and other streams' faces, share one model call)
    collect         the swapper's output for a submitted face
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
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, warp_paste_crop
from models.runtime.inference_service import Ticket
from models.types import ImageBGR
from models.wrappers.swappers.base import FaceSwapper
from realtime.core.watermark.embed import MarkRequest
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
    slot: the face's slot this frame (its crop buffers), None for a crop of no submitted face.
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
    slot: int | None = None


@dataclass(slots=True)
class PendingSwap:
    """A face submitted to the swapper: its matrix, its slot, the ticket of its identity's swap
    and, for a face changing identity, the ticket of the identity it fades from."""

    m: Matrix2x3
    slot: int
    ticket: Ticket
    previous: Ticket | None = None


class FaceBackend(Protocol):
    """The operations of the per-face chain that depend on where the pixels live (module doc)."""

    def begin(
        self,
        image: ImageBGR,
        timings: dict[str, float],
        compositor: Compositor,
        picture: object | None,
        mark: MarkRequest | None = None,
    ) -> None:
        """Start a frame: `image` is the host frame, swapped in place by the time `end` returns.
        `mark`: the frame's watermark, for a backend that adds it before `end` hands the frame back
        (setting `mark.done`); one that does not leaves it to the engine's sink."""
        ...

    def submit(self, m: Matrix2x3, identity: int, previous: int | None) -> PendingSwap:
        """Crop the face aligned by `m` (frame -> crop) into its own slot and submit its swap with
        source identity `identity` (and `previous`, for a face fading between identities)."""
        ...

    def collect(self, pending: PendingSwap) -> tuple[FaceCrop, FaceCrop | None]:
        """The swapped face, and the previous identity's swap of it when one was submitted."""
        ...

    def submitting(self) -> AbstractContextManager[None]:
        """The frame's faces are submitted inside: they go to the model together, at its end."""
        ...

    def pixels(self, face: FaceCrop) -> ImageBGR:
        """`face` as uint8 BGR on the host, edited in place by the caller; the edits are pasted."""
        ...

    def reference(self, face: FaceCrop) -> ImageBGR:
        """The frame's own pixels under `face`'s crop (its slot's crop, or warped for a face of no
        slot), uint8 BGR on the host (read only)."""
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


@dataclass(slots=True)
class _HostSlot:
    """One face's buffers for a frame: its crop, the swapper's input made of it, its swaps."""

    crop: ImageBGR
    target: npt.NDArray[Any]
    swapped: ImageBGR
    before: ImageBGR  # the swap with the identity it fades from


class HostBackend:
    """The chain on the host: OpenCV warps, the swapper on numpy crops, the compositor's paste."""

    def __init__(self, swapper: FaceSwapper, latents: Sequence[npt.NDArray[np.float32]]) -> None:
        self._swapper = swapper
        self._sources = tuple(swapper.source_tensor(lat) for lat in latents)
        self._size = swapper.input_size
        self._slots: list[_HostSlot] = []  # grown to the most faces a frame has had, then reused
        self._used = 0
        self._scratch = np.zeros((self._size, self._size, 3), dtype=np.uint8)  # a crop of no slot
        self._image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)
        self._compositor = Compositor()

    def begin(
        self,
        image: ImageBGR,
        timings: dict[str, float],
        compositor: Compositor,
        picture: object | None,
        mark: MarkRequest | None = None,
    ) -> None:
        self._image = image  # (the host frame is marked by the engine's sink, after the label)
        self._compositor = compositor
        self._used = 0

    def submit(self, m: Matrix2x3, identity: int, previous: int | None) -> PendingSwap:
        index = self._used
        self._used += 1
        slot = self._slot(index)
        warp_paste_crop(self._image, m, self._size, out=slot.crop)
        self._swapper.encode_target(slot.crop, slot.target)
        ticket = self._swapper.submit(slot.target, self._sources[identity])
        before = None if previous is None else self._swapper.submit(slot.target, self._sources[previous])
        return PendingSwap(m, index, ticket, before)

    def submitting(self) -> AbstractContextManager[None]:
        return self._swapper.client.holding()

    def collect(self, pending: PendingSwap) -> tuple[FaceCrop, FaceCrop | None]:
        slot = self._slots[pending.slot]
        swapped = self._swapper.decode(np.asarray(pending.ticket.result()[0]), slot.swapped)
        face = FaceCrop(pending.m, host=swapped, slot=pending.slot)
        if pending.previous is None:
            return face, None
        before = self._swapper.decode(np.asarray(pending.previous.result()[0]), slot.before)
        return face, FaceCrop(pending.m, host=before, slot=pending.slot)

    def _slot(self, index: int) -> _HostSlot:
        while len(self._slots) <= index:
            s = self._size
            self._slots.append(
                _HostSlot(
                    np.zeros((s, s, 3), dtype=np.uint8),
                    np.zeros((1, 3, s, s), dtype=self._swapper.target_dtype),
                    np.zeros((s, s, 3), dtype=np.uint8),
                    np.zeros((s, s, 3), dtype=np.uint8),
                )
            )
        return self._slots[index]

    def pixels(self, face: FaceCrop) -> ImageBGR:
        assert face.host is not None, "a host crop always has its pixels"
        return face.host

    def reference(self, face: FaceCrop) -> ImageBGR:
        if face.slot is not None:
            return self._slots[face.slot].crop  # the swap's own input: the frame under this face
        return warp_paste_crop(self._image, face.m, self._size, out=self._scratch)

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


__all__ = ["FaceBackend", "FaceCrop", "HostBackend", "PendingSwap"]
