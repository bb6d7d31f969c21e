"""The per-face chain's device backend: crop graph -> swapper (IOBinding) -> paste graph.

Chosen by realtime.face.swap_worker.FaceSwapWorker when the pipeline runs on CUDA or TensorRT (on
the CPU provider the host backend stays: it is much faster there). Per frame with faces to swap:

    upload       the host frame, once, into a reused device buffer; or none at all when the frame
                 came from NVDEC: its NV12 picture, still on the GPU, is bound by pointer and
                 converted to BGR there (realtime.io.nvdec.DeviceVideoFrame.device_picture)
    per face     crop graph (models.ops.device_ops) -> its `crop` OrtValue bound as is as the swapper's
                 `target` (no copy) -> swapper output bound as the paste graph's `crop` -> paste,
                 in place, into the device frame's band of rows
    download     the finished frame, once, back into the host image

The source latents are uploaded once when the backend is built. Host<->device transfers are
counted the way realtime.tools.gpu_bench counts them (`Copies`): 1 frame upload, per face 3 small
parameter uploads (crop matrix, paste matrix, paste mask), 1 download. They are counted as issued,
also when the backend is forced onto the CPU provider (tests), where the "transfers" are host memcpys.

With an enhancer the swap is pasted first and each face then goes on, still on the device: the
FFHQ crop graph reads the swapped frame -> the restorer (IOBinding) -> the signed paste graph
blends its output back with the swap's mask carried into FFHQ space, at `enhancer.blend`
strength, limited to the swap's own region. Per face that adds the FFHQ crop matrix and the paste
matrix + FFHQ mask as parameter uploads. Where the mask is 1 this equals the host enhancer; on the
feathered edge the restorer is blended over the feathered swap (the host blends it over the plain
swap), a difference only where the two backends' edges mix anyway.

Host steps on crops (colour match, Poisson blending, sharpening, a cross-fade) ask for a crop's
`pixels`: the crop is downloaded (196 kB at 128 px), finished on the host and bound back as the
paste's input, while the frame stays on the device. Poisson blending has no device graph: its
sparse solve runs on the host (its cost: docs/PERFORMANCE.md), so this round trip is its fallback.
Each such trip is counted (`Copies.crop_downloads` /
`crop_uploads`). The masks are computed on the host frame's crops and join the paste mask. A
float16-output swapper's or restorer's crop takes the same round trip (the paste graph takes
float32). With `enhancer.every_n` > 1 a face's correction (restored - input) is kept on the host
and added to the current frame's FFHQ crop on the frames in between, as steps/enhance.py does.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Collection, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelOutputError
from models.ops.align import Matrix2x3, invert_affine, similarity_transform, warp_paste_crop
from models.ops.crop_geometry import CropSpec
from models.ops.device_ops import DeviceOps
from models.ops.device_twins import decode_crop, decode_signed_crop
from models.ops.yuv import BT601_LIMITED
from models.runtime.batch_window import BatchPolicy
from models.runtime.device_batching import DeviceBatchRunner
from models.runtime.inference_service import InferenceService, ServiceClient
from models.runtime.iobinding import TensorView, session_device
from models.runtime.session import SessionFactory
from models.types import ImageBGR
from models.wrappers.enhancers import FaceRestorer, ffhq_template
from models.wrappers.swappers.base import SOURCE_NAME, TARGET_NAME, FaceSwapper
from realtime.core.watermark.embed import MarkRequest
from realtime.face.backend import FaceCrop, PendingSwap
from realtime.face.host.compositor import Compositor, MaskArray, compose_affine, paste_region
from realtime.face.host.enhancer import FaceEnhanceStage

_THETA_BYTES = 2 * 3 * 4  # one float32 2x3 matrix
log = logging.getLogger(__name__)

_MAX_KEPT_FACES = 8  # restorer corrections kept for reuse (oldest dropped first)


@dataclass(slots=True)
class _Correction:
    delta: npt.NDArray[np.float32]  # (S, S, 3) restored - input, FFHQ-aligned, BGR
    age: int = 0  # frames since the restorer produced it


def encode_unit_crop(crop: ImageBGR, out: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """uint8 BGR -> [1,3,S,S] RGB in [0,1] that decode_crop (and the paste graph's truncation) turns
    back into exactly `crop`: (v + 0.5) / 255 survives float32 rounding on the way back."""
    np.add(crop[:, :, ::-1].transpose(2, 0, 1), np.float32(0.5), out=out[0], dtype=np.float32)
    np.multiply(out, np.float32(1.0 / 255.0), out=out)
    return out


def encode_signed_crop(crop: ImageBGR, out: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """uint8 BGR -> [1,3,S,S] RGB in [-1,1] that decode_signed_crop turns back into exactly `crop`."""
    np.multiply(crop[:, :, ::-1].transpose(2, 0, 1), np.float32(1.0 / 127.5), out=out[0], dtype=np.float32)
    np.subtract(out, np.float32(1.0), out=out)
    return out


class DeviceRestorer:
    """A face restorer bound for the device path: its FFHQ crop spec, template and mask buffer."""

    def __init__(self, restorer: FaceRestorer, factory: SessionFactory) -> None:
        self.restorer = restorer
        self.size = restorer.size
        # Its calls through an inference service of device tensors (each face's FFHQ crop bound
        # as is, the output a tensor of its own), as the swapper's.
        runner = DeviceBatchRunner(restorer.session, factory, [restorer.output_name])
        self.client = InferenceService([runner], BatchPolicy(max_batch=1), restorer.contract.label).client(
            "worker"
        )
        # The restorer's own preprocessing fused into the crop graph: RGB, x / 127.5 - 1 (cast to
        # float16 last for a float16 file, whose output then takes the host round trip: the paste
        # graph takes float32).
        fp16 = restorer.image_dtype == np.float16
        self.spec = CropSpec(self.size, rgb=True, scale=1.0 / 127.5, offset=-1.0, fp16=fp16)
        self.float32_output = restorer.session.get_outputs()[0].type == "tensor(float)"
        self.template = ffhq_template(self.size)
        self.mask: MaskArray = np.zeros((self.size, self.size), dtype=np.float32)  # reused per face

    def matrix(self, kps: npt.ArrayLike) -> Matrix2x3:
        """frame -> FFHQ crop (the same fit as realtime.face.steps.enhance.FaceEnhanceStage.matrix)."""
        return similarity_transform(np.asarray(kps, dtype=np.float64).reshape(5, 2), self.template)

    def carry_mask(self, mask: MaskArray, m_swap: Matrix2x3, m_ffhq: Matrix2x3) -> MaskArray:
        """The swap's crop-space mask in FFHQ space (zero beyond the swapped square)."""
        to_ffhq = compose_affine(m_ffhq, invert_affine(m_swap))
        cv2.warpAffine(mask, to_ffhq, (self.size, self.size), dst=self.mask, borderValue=0.0)
        return self.mask


class DeviceBackend:
    """The chain on the device with DeviceOps and a bound swapper (one per worker thread).

    The frame goes to the device at the first face's crop (uploaded, or converted from the
    decoder's NV12 picture) and comes back once, in `end`. Crops reach the host only for the host
    steps that ask for their `pixels`, and go back as the paste's input.
    """

    def __init__(
        self,
        swapper: FaceSwapper,
        latents: Sequence[npt.NDArray[np.float32]],
        ops: DeviceOps,
        client: ServiceClient | None = None,
    ) -> None:
        """client: the stream's client of the swapper's shared device service (realtime.wiring);
        None: a private one, each face run at once."""
        if not self.supports(swapper):
            raise ValueError("the device path needs a swapper with a float32 output")
        self.ops = ops
        self.device_id = ops.factory.config.device_id
        if client is None:
            runner = DeviceBatchRunner(swapper.session, ops.factory, [swapper.output_name])
            client = InferenceService([runner], BatchPolicy(max_batch=1), swapper.label).client("worker")
        self.client = client
        self.device_type: str = session_device(swapper.session, ops.factory.device_type)
        self._size = swapper.input_size
        self._fp16 = swapper.target_dtype == np.float16
        # The swapper's own preprocessing fused into the crop graph (its facts: RGB, mean, std).
        self._crop_spec = swapper.facts.crop_spec(fp16=self._fp16)
        self._signed = swapper.signed_output
        # A float16 output cannot feed the float32 paste graph: its crop takes the host round trip.
        self._fp16_out = swapper.session.get_outputs()[0].type == "tensor(float16)"
        source_shape = swapper.source_shape()  # an identity vector, or a source picture
        self._latents = tuple(
            ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(np.asarray(lat).reshape(source_shape), dtype=swapper.source_dtype),
                self.device_type,
                self.device_id,
            )
            for lat in latents
        )
        self._upload_buffer: Any = None  # the reused device frame (OrtValue), per resolution
        self._restorer: DeviceRestorer | None = None  # bound for the enhancer in use
        self._host_crops: dict[tuple[int, bool], npt.NDArray[np.float32]] = {}  # finished crops
        self._reference = np.zeros((self._size, self._size, 3), dtype=np.uint8)
        # Restorer corrections kept per face for enhancer.every_n > 1 (restored - input, FFHQ space).
        self._corrections: OrderedDict[Hashable, _Correction] = OrderedDict()
        self.restorer_runs = 0  # for metrics and tests
        self.last_copies = Copies()
        # This frame's state (begin .. end).
        self._image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)
        self._picture: Any = None
        self._timings: dict[str, float] = {}
        self._frame: Any = None  # the frame on the device once the first face needs it
        self._mark: MarkRequest | None = None  # the frame's watermark, added before the download
        # One device crop per face of a frame (the swapper's `target`), grown as needed, reused.
        self._crops: list[Any] = []
        self._used = 0

    @staticmethod
    def supports(swapper: FaceSwapper) -> bool:
        """A float32 or float16 output (the paste graph takes float32: a float16 crop is converted
        on its host round trip)."""
        return swapper.session.get_outputs()[0].type in ("tensor(float)", "tensor(float16)")

    def bind_restorer(self, restorer: FaceRestorer) -> DeviceRestorer:
        """The device binding of `restorer` (made once; a new restorer replaces the old binding)."""
        if self._restorer is None or self._restorer.restorer is not restorer:
            self._restorer = DeviceRestorer(restorer, self.ops.factory)
        return self._restorer

    # -- FaceBackend ---------------------------------------------------------------------------

    def begin(
        self,
        image: ImageBGR,
        timings: dict[str, float],
        compositor: Compositor,
        picture: object | None,
        mark: MarkRequest | None = None,
    ) -> None:
        """picture: the frame's NV12 picture still on the device (a realtime.io.nvdec.DeviceNV12,
        or any object with its ptr/width/height/pitch/gpu_id and optional device_type), the same
        picture `image` was downloaded from; when it can be bound as is it replaces the upload.
        mark: the frame's watermark, added on the device before the download when the frame went
        there (a frame with no face stays on the host, and the engine's sink marks it)."""
        self.last_copies = Copies()
        self._mark = mark
        self._image = image
        self._picture = picture
        self._timings = timings
        self._frame = None
        self._used = 0

    def submit(self, m: Matrix2x3, identity: int, previous: int | None) -> PendingSwap:
        frame = self._device_frame()
        index = self._used
        self._used += 1
        crop = self.ops.crop(frame, m, self._crop_spec, out=self._crop_slot(index))
        self.last_copies.add_params(1, _THETA_BYTES)
        ticket = self.client.submit({TARGET_NAME: crop, SOURCE_NAME: self._latents[identity]})
        before = None
        if previous is not None:
            before = self.client.submit({TARGET_NAME: crop, SOURCE_NAME: self._latents[previous]})
        return PendingSwap(m, index, ticket, before)

    def submitting(self) -> AbstractContextManager[None]:
        return self.client.holding()

    def collect(self, pending: PendingSwap) -> tuple[FaceCrop, FaceCrop | None]:
        # Each result is a device tensor of its own (the first output: HyperSwap adds its mask).
        out = pending.ticket.result()[0]
        face = FaceCrop(
            pending.m, value=out, signed=self._signed, needs_host=self._fp16_out, slot=pending.slot
        )
        if pending.previous is None:
            return face, None
        host = self._fetch(pending.previous.result()[0], signed=self._signed)  # cross-faded on the host
        return face, FaceCrop(pending.m, host=host, signed=self._signed, needs_host=True, slot=pending.slot)

    def _crop_slot(self, index: int) -> Any:
        while len(self._crops) <= index:
            dtype = np.float16 if self._fp16 else np.float32
            shape = [1, 3, self._size, self._size]
            self._crops.append(
                ort.OrtValue.ortvalue_from_shape_and_type(shape, dtype, self.device_type, self.device_id)
            )
        return self._crops[index]

    def pixels(self, face: FaceCrop) -> ImageBGR:
        if face.host is None:
            face.host = self._fetch(face.value, signed=face.signed)
        return face.host

    def reference(self, face: FaceCrop) -> ImageBGR:
        # From the host copy of the frame, which still holds the original picture.
        size = int(self._reference.shape[0])
        return warp_paste_crop(self._image, face.m, size, out=self._reference)

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
        """The FFHQ crop graph reads the frame with the swap pasted in -> the restorer (IOBinding);
        its output is pasted over the swap at `blend` strength through the swap's mask carried
        into FFHQ space. With a `key` and every_n > 1 the face's kept correction is reused on all
        but every `every_n`th call."""
        assert face.mask is not None, "the mask step runs before the enhancer"
        self.paste(face, opacity)
        restorer = stage.restorer
        bound = self.bind_restorer(restorer)
        m = bound.matrix(kps)
        crop = self.ops.crop(self._frame, m, bound.spec)
        self.last_copies.add_params(1, _THETA_BYTES)
        if every_n <= 1 and key is not None:
            # Not kept this time: an older kept correction must not come back later.
            self._corrections.pop(key, None)
            key = None
        cached = self._corrections.get(key) if key is not None else None
        ran = cached is None or cached.age + 1 >= max(every_n, 1)
        out = FaceCrop(m, signed=True, region=paste_region(self._image.shape, self._size, face.m))
        if ran:
            out.value = bound.client.run({restorer.image_name: crop, **restorer.extra_feeds()})[0]
            out.needs_host = not bound.float32_output
            self.restorer_runs += 1
            if key is not None:
                # Keep restored - input for the frames in between (both decoded as the host does).
                before = self._fetch(crop, signed=True, model_output=False)
                self._keep(key, before, self.pixels(out))
        else:
            assert cached is not None and key is not None
            cached.age += 1
            self._corrections.move_to_end(key)
            # This frame's face, at this frame's alignment, plus the kept correction: no ghost of
            # where the head was, only the correction is older.
            crop_bgr = self._fetch(crop, signed=True, model_output=False)
            corrected = np.add(crop_bgr, cached.delta, dtype=np.float32)
            np.copyto(crop_bgr, np.rint(np.clip(corrected, 0.0, 255.0)), casting="unsafe")
            out.host = crop_bgr
        out.mask = bound.carry_mask(face.mask, face.m, m)
        out.strength = blend
        return out, ran

    def paste(self, face: FaceCrop, opacity: float) -> None:
        assert face.mask is not None, "the mask step runs before the paste"
        value: Any = face.value
        if face.host is not None or face.needs_host:
            value = self._send(self.pixels(face), signed=face.signed)
        self.ops.paste(
            self._device_frame(),  # (a privacy cover may be the frame's first paste)
            value,
            face.mask,
            face.m,
            opacity=opacity * face.strength,
            signed=face.signed,
            limit=face.region,
        )
        self.last_copies.add_params(2, _THETA_BYTES + face.mask.size * 4)
        face.placed = True

    def end(self, keys: Collection[Hashable], stage: FaceEnhanceStage | None) -> None:
        for gone in [k for k in self._corrections if k not in keys]:
            del self._corrections[gone]  # faces that left: their corrections go with them
        if self._frame is None:
            return  # no face needed the frame on the device
        if self._mark is not None:
            self._add_mark(self._mark)
        t0 = time.perf_counter()
        np.copyto(self._image, np.asarray(self._frame.numpy()))  # the one download
        copies = self.last_copies
        copies.downloads += 1
        copies.download_bytes += int(self._image.nbytes)
        _add_ms(self._timings, "download", t0)
        self._frame = None

    # -- internals -----------------------------------------------------------------------------

    def _add_mark(self, mark: MarkRequest) -> None:
        """The watermark onto the device frame; its cells follow the host picture (the input's,
        still in `_image`: the amplitudes follow how busy the picture is, which the swapped faces
        barely change)."""
        t0 = time.perf_counter()
        offsets = mark.offsets_for(self._image)
        self.ops.mark(self._frame, offsets.cells, offsets.row_of, offsets.col_of)
        self.last_copies.add_params(1, int(offsets.cells.nbytes))
        mark.done = True
        _add_ms(self._timings, "watermark", t0)

    def _device_frame(self) -> Any:
        if self._frame is None:
            t0 = time.perf_counter()
            frame = self._from_picture(self._picture, self._image.shape)
            if frame is None:
                frame = self._upload(self._image)
                self.last_copies.frame_uploads += 1
                _add_ms(self._timings, "upload", t0)
            else:
                _add_ms(self._timings, "nv12", t0)
            self._frame = frame
        return self._frame

    def _keep(self, key: Hashable, before: ImageBGR, restored: ImageBGR) -> None:
        entry = self._corrections.get(key)
        if entry is None or entry.delta.shape != before.shape:
            entry = self._corrections[key] = _Correction(np.zeros(before.shape, dtype=np.float32))
            while len(self._corrections) > _MAX_KEPT_FACES:
                self._corrections.popitem(last=False)
        np.subtract(restored, before, out=entry.delta, dtype=np.float32)
        entry.age = 0
        self._corrections.move_to_end(key)

    def _fetch(self, value: Any, *, signed: bool = False, model_output: bool = True) -> ImageBGR:
        """A crop brought to the host and decoded like the OpenCV path decodes it."""
        host = np.asarray(value.numpy())  # the download (a view on the CPU provider)
        copies = self.last_copies
        copies.crop_downloads += 1
        copies.crop_bytes += int(host.nbytes)
        if model_output and not _all_finite(host):
            # A float16 model's overflow, caught where its crop comes to the host anyway (decoded,
            # NaN became black blocks). Crops that stay on the device are not checked.
            raise ModelOutputError(
                "A face model returned NaN or infinite values (a float16 overflow?).",
                hint="Use fp32 model files (an fp32 swap.model, pipeline.fp16 = false).",
            )
        return np.ascontiguousarray(decode_signed_crop(host) if signed else decode_crop(host))

    def _send(self, crop: ImageBGR, *, signed: bool) -> npt.NDArray[np.float32]:
        """The finished crop as the paste's input (bound from host memory: ORT uploads it)."""
        copies = self.last_copies
        copies.crop_uploads += 1
        copies.crop_bytes += int(crop.size) * 4
        size = int(crop.shape[0])
        buf = self._host_crops.get((size, signed))
        if buf is None:
            buf = self._host_crops[(size, signed)] = np.empty((1, 3, size, size), dtype=np.float32)
        return encode_signed_crop(crop, buf) if signed else encode_unit_crop(crop, buf)

    def _from_picture(self, picture: Any, shape: tuple[int, ...]) -> Any | None:
        """The device BGR frame converted from the decoder's NV12 picture, or None when it cannot
        be bound as is (padded rows, another GPU, another size, or the OpenCV ops)."""
        if picture is None or not self.ops.use_graphs:
            return None
        width, height = int(picture.width), int(picture.height)
        where = str(getattr(picture, "device_type", "cuda"))
        if (
            int(picture.pitch) != width  # the NV12 graph reads packed rows
            or (height, width) != (int(shape[0]), int(shape[1]))
            or where != self.ops.device_type
            or int(picture.gpu_id) != self.device_id
        ):
            return None
        view = TensorView(int(picture.ptr), (height * 3 // 2, width), np.dtype(np.uint8), where, picture)
        return self.ops.nv12_to_bgr(view, getattr(picture, "colour", BT601_LIMITED))

    def _upload(self, image: ImageBGR) -> Any:
        shape = [int(d) for d in image.shape]
        buf = self._upload_buffer
        if buf is None or [int(d) for d in buf.shape()] != shape:
            buf = self._upload_buffer = ort.OrtValue.ortvalue_from_shape_and_type(
                shape, np.uint8, self.device_type, self.device_id
            )
        buf.update_inplace(np.ascontiguousarray(image))
        return buf


def _add_ms(timings: dict[str, float], key: str, t0: float) -> None:
    timings[key] = timings.get(key, 0.0) + (time.perf_counter() - t0) * 1000.0


def _all_finite(host: npt.NDArray[Any]) -> bool:
    """No NaN or infinity. For float16 the exponent bits are tested as integers: np.isfinite on a
    float16 crop costs ~1.8 ms at 512 px, the bit test a tenth of that."""
    if host.dtype == np.float16:
        return not bool(np.any((host.view(np.uint16) & 0x7C00) == 0x7C00))
    return bool(np.isfinite(host).all())


@dataclass(slots=True)
class Copies:
    """Host<->device transfers one frame issues (counted where this module asks for them)."""

    frame_uploads: int = 0
    param_uploads: int = 0  # small host tensors bound per call (crop/paste matrices, paste masks)
    param_bytes: int = 0
    downloads: int = 0
    download_bytes: int = 0
    # Face crops taken to the host (and sent back) for host-only steps: colour match, sharpening,
    # a float16 model output, a restorer correction kept or re-applied.
    crop_downloads: int = 0
    crop_uploads: int = 0
    crop_bytes: int = 0

    def add_params(self, count: int, nbytes: int) -> None:
        self.param_uploads += count
        self.param_bytes += nbytes

    @property
    def total(self) -> int:
        """Every transfer: frame and parameter uploads, frame downloads, crop downloads and uploads."""
        return (
            self.frame_uploads + self.param_uploads + self.downloads + self.crop_downloads + self.crop_uploads
        )

    def describe(self) -> str:
        text = (
            f"up {self.frame_uploads} frame + {self.param_uploads} params ({self.param_bytes / 1e3:.0f} kB), "
            f"down {self.downloads} ({self.download_bytes / 1e6:.1f} MB)"
        )
        if self.crop_downloads or self.crop_uploads:
            kb = self.crop_bytes / 1e3
            text += f", crops down {self.crop_downloads} / up {self.crop_uploads} ({kb:.0f} kB)"
        return text


__all__ = ["Copies", "DeviceBackend", "DeviceRestorer", "encode_signed_crop", "encode_unit_crop"]
