"""The swap worker's face path on the device: crop graph -> inswapper (IOBinding) -> paste graph.

Used by realtime.face.stages.FaceSwapWorker when the pipeline runs on CUDA or TensorRT (on the CPU
provider the OpenCV path stays: it is much faster there). Per frame with faces to swap:

    upload       the host frame, once, into a reused device buffer; or none at all when the frame
                 came from NVDEC: its NV12 picture, still on the GPU, is bound by pointer and
                 converted to BGR there (realtime.io.nvdec.DeviceVideoFrame.device_picture)
    per face     crop graph (models.ops.device_ops) -> its `crop` OrtValue bound as is as the swapper's
                 `target` (no copy) -> swapper output bound as the paste graph's `crop` -> paste,
                 in place, into the device frame's band of rows
    download     the finished frame, once, back into the host image

The source latents are uploaded once when the path is built. Host<->device transfers are counted
the way realtime.tools.gpu_bench counts them (`Copies`): 1 frame upload, per face 3 small parameter
uploads (crop matrix, paste matrix, paste mask), 1 download. They are counted as issued, also when
the path is forced onto the CPU provider (tests), where the "transfers" are host memcpys.

With an enhancer (restoring every frame) each face then goes on, still
on the device: the FFHQ crop graph reads the swapped frame -> the restorer (IOBinding) -> the
signed paste graph blends its output back with the swap's mask carried into FFHQ space, at
`enhancer.blend` strength, limited to the swap's own region. Per face that adds the FFHQ crop
matrix and the paste matrix + FFHQ mask as parameter uploads. Where the mask is 1 this equals the
OpenCV path's enhancer; on the feathered edge the restorer is blended over the feathered swap
(the OpenCV path blends it over the plain swap), a difference only where the two paths' edges
mix anyway.

Host finishing (`HostFinish`): the mouth mask needs only the landmarks and is cut out of the paste
mask on the host (uploaded per face anyway); colour matching and sharpening run on the host on
the face's small crop only: the swapped crop (or the restorer's output, for sharpening after an
enhancer) is downloaded (196 kB at 128 px), finished like the OpenCV path does it, and bound back
as the paste's input, while the frame stays on the device. Each such trip is counted
(`Copies.crop_downloads` / `crop_uploads`). The occlusion and region masks run on the host frame's crops and
join the paste mask. A float16-output swapper's or restorer's crop takes the same round trip (the
paste graph takes float32). With `enhancer.every_n` > 1 a face's correction (restored -
input) is kept on the host and added to the current frame's FFHQ crop on the frames in between, as
realtime/face/steps/enhance.py does.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelOutputError
from models.ops.align import Matrix2x3, estimate_norm, invert_affine, similarity_transform
from models.ops.device_ops import CropSpec, DeviceOps, decode_crop, decode_signed_crop
from models.ops.yuv import BT601_LIMITED
from models.runtime.iobinding import BoundSession, TensorView
from models.runtime.session import SessionFactory
from models.types import ImageBGR
from models.wrappers.enhancers import FaceRestorer, ffhq_template
from models.wrappers.inswapper import SOURCE_NAME, TARGET_NAME, InSwapper
from realtime.core.contracts import SwapTarget, check_identity
from realtime.face.steps.compositor import Compositor, MaskArray, compose_affine, cross_fade, paste_region
from realtime.face.steps.masks import FaceMask

_THETA_BYTES = 2 * 3 * 4  # one float32 2x3 matrix
log = logging.getLogger(__name__)

_MAX_KEPT_FACES = 8  # restorer corrections kept for reuse (oldest dropped first)


@dataclass(slots=True)
class _Correction:
    delta: npt.NDArray[np.float32]  # (S, S, 3) restored - input, FFHQ-aligned, BGR
    age: int = 0  # frames since the restorer produced it


@dataclass(frozen=True, slots=True)
class HostFinish:
    """Per-face steps of the device path that run on the host, on small crops only.

    mask(target, m, box): the face's paste mask (and colour-measurement weights) from the feathered box.
    swapped(target, m, face, crop): edit the decoded swapped crop (uint8 BGR) in place; None: no trip.
    restored(crop): edit the decoded restorer output (uint8 BGR) in place; None: no trip.
    """

    mask: Callable[[SwapTarget, Matrix2x3, MaskArray], FaceMask]
    swapped: Callable[[SwapTarget, Matrix2x3, FaceMask, ImageBGR], None] | None = None
    restored: Callable[[ImageBGR], None] | None = None


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

    def __init__(self, restorer: FaceRestorer, device_id: int) -> None:
        self.restorer = restorer
        self.size = restorer.size
        device = SessionFactory.device_type_of(restorer.session)
        self.bound = BoundSession(restorer.session, device, device_id)
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


class DeviceFacePath:
    """Swap + paste of a frame's faces with DeviceOps and a bound swapper (one per worker thread)."""

    def __init__(
        self, swapper: InSwapper, latents: Sequence[npt.NDArray[np.float32]], ops: DeviceOps
    ) -> None:
        if not self.supports(swapper):
            raise ValueError("the device path needs a swapper with a float32 output")
        self.ops = ops
        device = SessionFactory.device_type_of(swapper.session)
        self.device_id = ops.factory.config.device_id
        self.swapper = BoundSession(swapper.session, device, self.device_id)
        self.device_type: str = self.swapper.device_type
        self._fp16 = swapper.target_dtype == np.float16
        # A float16 output cannot feed the float32 paste graph: its crop takes the host round trip.
        self._fp16_out = swapper.session.get_outputs()[0].type == "tensor(float16)"
        self._latents = tuple(
            ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(np.asarray(lat).reshape(1, -1), dtype=swapper.source_dtype),
                self.device_type,
                self.device_id,
            )
            for lat in latents
        )
        self._frame: Any = None  # the reused device frame (OrtValue), per resolution
        self._restorer: DeviceRestorer | None = None  # bound for the enhancer in use
        self._host_crops: dict[tuple[int, bool], npt.NDArray[np.float32]] = {}  # finished crops
        # Restorer corrections kept per face for enhancer.every_n > 1 (restored - input, FFHQ space).
        self._corrections: OrderedDict[Hashable, _Correction] = OrderedDict()
        self.restorer_runs = 0  # for metrics and tests
        self._said: set[str] = set()  # problems already logged (once each)
        self.last_copies = Copies()

    def bind_restorer(self, restorer: FaceRestorer) -> DeviceRestorer:
        """The device binding of `restorer` (made once; a new restorer replaces the old binding)."""
        if self._restorer is None or self._restorer.restorer is not restorer:
            self._restorer = DeviceRestorer(restorer, self.device_id)
        return self._restorer

    @staticmethod
    def supports(swapper: InSwapper) -> bool:
        """A float32 or float16 output (the paste graph takes float32: a float16 crop is converted
        on its host round trip, see `apply`)."""
        return swapper.session.get_outputs()[0].type in ("tensor(float)", "tensor(float16)")

    def apply(
        self,
        image: ImageBGR,
        targets: Sequence[SwapTarget],
        compositor: Compositor,
        opacity: float,
        timings: dict[str, float],
        *,
        restorer: FaceRestorer | None = None,
        blend: float = 1.0,
        every_n: int = 1,
        picture: Any = None,
        finish: HostFinish | None = None,
    ) -> Copies:
        """Swap `targets` into `image` in place; adds "swap" and "paste" ms to `timings` (and
        "enhance" with a restorer, run at `blend` strength: 0 the plain swap, 1 the restorer's).

        picture: the frame's NV12 picture still on the device (a realtime.io.nvdec.DeviceNV12, or any
        object with its ptr/width/height/pitch/gpu_id and optional device_type), the same picture
        `image` was downloaded from; when it can be bound as is it replaces the upload.

        finish: the host finishing steps (see HostFinish); default: the feathered box as the mask.

        every_n > 1: the restorer runs on every Nth frame per face (track id and identity); its
        correction (restored - input, aligned space) is kept on the host and added to the current
        frame's FFHQ crop in between, as realtime.face.steps.enhance does (one crop down and up per face).
        """
        copies = Copies()
        self.last_copies = copies
        if not targets:
            self._corrections.clear()  # nobody left to reuse a correction for
            return copies
        size = InSwapper.input_size
        t0 = time.perf_counter()
        frame = self._from_picture(picture, image.shape)
        if frame is None:
            frame = self._upload(image)
            copies.frame_uploads += 1
            _add_ms(timings, "upload", t0)
        else:
            _add_ms(timings, "nv12", t0)
        keys: list[Hashable] = []
        for target in targets:
            latent = self._latents[check_identity(target, len(self._latents))]
            t0 = time.perf_counter()
            m = estimate_norm(target.kps, size)
            crop = self.ops.crop_for_inswapper(frame, m, fp16=self._fp16)
            copies.add_params(1, _THETA_BYTES)
            before: ImageBGR | None = None
            if target.cross_fading:
                # A face changing identity: the old identity's swap comes to the host (the bound
                # output is reused by the next run) and the two are cross-faded there.
                previous = self._latents[check_identity(target, len(self._latents), target.previous_identity)]
                (old_swap,) = self.swapper.run({TARGET_NAME: crop, SOURCE_NAME: previous})
                before = self._fetch(old_swap, signed=False, copies=copies)
            (swapped,) = self.swapper.run({TARGET_NAME: crop, SOURCE_NAME: latent})
            _add_ms(timings, "swap", t0)
            t0 = time.perf_counter()
            mask = compositor.crop_mask(size, m)
            paste_input: Any = swapped
            face = finish.mask(target, m, mask) if finish is not None else None
            if face is not None:
                mask = face.alpha
            edit = finish.swapped if finish is not None else None
            if edit is not None or self._fp16_out or before is not None:
                crop_bgr = self._fetch(swapped, signed=False, copies=copies)
                if before is not None:
                    cross_fade(before, crop_bgr, target.mix, crop_bgr)
                if edit is not None and face is not None:
                    edit(target, m, face, crop_bgr)
                paste_input = self._send(crop_bgr, signed=False, copies=copies)
            self.ops.paste(frame, paste_input, mask, m, opacity=opacity * target.weight)
            copies.add_params(2, _THETA_BYTES + mask.size * 4)
            _add_ms(timings, "paste", t0)
            if restorer is not None and blend > 0.0:
                t0 = time.perf_counter()
                after = finish.restored if finish is not None else None
                key = (target.track_id, target.identity) if every_n > 1 and target.track_id >= 0 else None
                try:
                    ran = self._enhance(
                        frame,
                        image.shape,
                        target,
                        m,
                        mask,
                        restorer,
                        opacity * blend,
                        copies,
                        after,
                        key,
                        every_n,
                    )
                except ModelOutputError as exc:
                    # As on the OpenCV path: this face keeps the plain swap (already pasted).
                    if exc.user_message() not in self._said:
                        self._said.add(exc.user_message())
                        log.warning("%s The plain swap is used where that happens.", exc.user_message())
                    continue
                if key is not None:
                    keys.append(key)
                _add_ms(timings, "enhance" if ran else "enhance.reuse", t0)
        for gone in [k for k in self._corrections if k not in keys]:
            del self._corrections[gone]  # faces that left: their corrections go with them
        t0 = time.perf_counter()
        np.copyto(image, np.asarray(frame.numpy()))  # the one download
        copies.downloads += 1
        copies.download_bytes += int(image.nbytes)
        _add_ms(timings, "download", t0)
        return copies

    def _enhance(
        self,
        frame: Any,
        shape: tuple[int, ...],
        target: SwapTarget,
        m_swap: Matrix2x3,
        mask_swap: MaskArray,
        restorer: FaceRestorer,
        strength: float,
        copies: Copies,
        after: Callable[[ImageBGR], None] | None = None,
        key: Hashable | None = None,
        every_n: int = 1,
    ) -> bool:
        """Restore one swapped face on the device: FFHQ crop -> restorer -> signed paste (with
        `after` run on the host on the restorer's output first, e.g. sharpening). With a `key`,
        reuse that face's kept correction on all but every `every_n`th call. True: the model ran."""
        bound = self.bind_restorer(restorer)
        m = bound.matrix(target.kps)
        face = self.ops.crop(frame, m, bound.spec)
        copies.add_params(1, _THETA_BYTES)
        cached = self._corrections.get(key) if key is not None else None
        ran = cached is None or cached.age + 1 >= max(every_n, 1)
        result: Any
        if ran:
            (result,) = bound.bound.run({restorer.image_name: face, **restorer.extra_feeds()})
            self.restorer_runs += 1
            if key is not None:
                # Keep restored - input for the frames in between (both decoded as the host does).
                before = self._fetch(face, signed=True, copies=copies, model_output=False)
                restored = self._fetch(result, signed=True, copies=copies)
                self._keep(key, before, restored)
                if after is not None:
                    after(restored)
                result = self._send(restored, signed=True, copies=copies)
            elif after is not None or not bound.float32_output:
                crop_bgr = self._fetch(result, signed=True, copies=copies)
                if after is not None:
                    after(crop_bgr)
                result = self._send(crop_bgr, signed=True, copies=copies)
        else:
            assert cached is not None and key is not None
            cached.age += 1
            self._corrections.move_to_end(key)
            # This frame's face, at this frame's alignment, plus the kept correction: no ghost of
            # where the head was, only the correction is older.
            crop_bgr = self._fetch(face, signed=True, copies=copies, model_output=False)
            corrected = np.add(crop_bgr, cached.delta, dtype=np.float32)
            np.copyto(crop_bgr, np.rint(np.clip(corrected, 0.0, 255.0)), casting="unsafe")
            if after is not None:
                after(crop_bgr)
            result = self._send(crop_bgr, signed=True, copies=copies)
        mask = bound.carry_mask(mask_swap, m_swap, m)
        # The FFHQ crop is larger than the face; its mask is zero beyond the swap's square.
        limit = paste_region(shape, InSwapper.input_size, m_swap)
        self.ops.paste(frame, result, mask, m, opacity=strength * target.weight, signed=True, limit=limit)
        copies.add_params(2, _THETA_BYTES + mask.size * 4)
        return ran

    def _keep(self, key: Hashable, before: ImageBGR, restored: ImageBGR) -> None:
        entry = self._corrections.get(key)
        if entry is None or entry.delta.shape != before.shape:
            entry = self._corrections[key] = _Correction(np.zeros(before.shape, dtype=np.float32))
            while len(self._corrections) > _MAX_KEPT_FACES:
                self._corrections.popitem(last=False)
        np.subtract(restored, before, out=entry.delta, dtype=np.float32)
        entry.age = 0
        self._corrections.move_to_end(key)

    def _fetch(self, value: Any, *, signed: bool, copies: Copies, model_output: bool = True) -> ImageBGR:
        """A model's output crop brought to the host and decoded like the OpenCV path decodes it."""
        host = np.asarray(value.numpy())  # the download (a view on the CPU provider)
        copies.crop_downloads += 1
        copies.crop_bytes += int(host.nbytes)
        if model_output and not _all_finite(host):
            # A float16 model's overflow, caught where its crop comes to the host anyway (decoded,
            # NaN became black blocks). Crops that stay on the device are not checked.
            raise ModelOutputError(
                "A face model returned NaN or infinite values (a float16 overflow?).",
                hint="Use the fp32 models (swap.model = inswapper_128, pipeline.fp16 = false).",
            )
        return np.ascontiguousarray(decode_signed_crop(host) if signed else decode_crop(host))

    def _send(self, crop: ImageBGR, *, signed: bool, copies: Copies) -> npt.NDArray[np.float32]:
        """The finished crop as the paste's input (bound from host memory: ORT uploads it)."""
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
        if self._frame is None or [int(d) for d in self._frame.shape()] != shape:
            self._frame = ort.OrtValue.ortvalue_from_shape_and_type(
                shape, np.uint8, self.device_type, self.device_id
            )
        self._frame.update_inplace(np.ascontiguousarray(image))
        return self._frame


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
