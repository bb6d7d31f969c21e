"""The swap worker's face path on the device: crop graph -> inswapper (IOBinding) -> paste graph.

Used by realtime.stages.FaceSwapWorker when the pipeline runs on CUDA or TensorRT (on the CPU
provider the OpenCV path stays: it is much faster there). Per frame with faces to swap:

    upload       the host frame, once, into a reused device buffer
    per face     crop graph (models.device_ops) -> its `crop` OrtValue bound as is as the swapper's
                 `target` (no copy) -> swapper output bound as the paste graph's `crop` -> paste,
                 in place, into the device frame's band of rows
    download     the finished frame, once, back into the host image

The source latents are uploaded once when the path is built. Host<->device transfers are counted
the way realtime.gpu_bench counts them (`Copies`): 1 frame upload, per face 3 small parameter
uploads (crop matrix, paste matrix, paste mask), 1 download. They are counted as issued, also when
the path is forced onto the CPU provider (tests), where the "transfers" are host memcpys.

Only the default composite runs here: the feathered box mask, opacity. The enhancer, the extra
masks, colour matching and sharpening still need the crop on the host; FaceSwapWorker keeps its
OpenCV path for frames that use any of them (see docs/GPU.md, "Not yet on the device").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.align import estimate_norm
from models.device_ops import DeviceOps
from models.inswapper import SOURCE_NAME, TARGET_NAME, InSwapper
from models.iobinding import BoundSession
from models.session import SessionFactory
from models.types import ImageBGR
from realtime.compositor import Compositor
from realtime.gpu_bench import Copies
from realtime.stage_api import SwapTarget

_THETA_BYTES = 2 * 3 * 4  # one float32 2x3 matrix


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
        self._latents = tuple(
            ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(np.asarray(lat).reshape(1, -1), dtype=swapper.source_dtype),
                self.device_type,
                self.device_id,
            )
            for lat in latents
        )
        self._frame: Any = None  # the reused device frame (OrtValue), per resolution
        self.last_copies = Copies()

    @staticmethod
    def supports(swapper: InSwapper) -> bool:
        """The paste graph takes the swapped crop as float32: an fp16-output swapper stays on OpenCV."""
        return bool(swapper.session.get_outputs()[0].type == "tensor(float)")

    def apply(
        self,
        image: ImageBGR,
        targets: Sequence[SwapTarget],
        compositor: Compositor,
        opacity: float,
        timings: dict[str, float],
    ) -> Copies:
        """Swap `targets` into `image` in place; adds "swap" and "paste" ms to `timings`."""
        copies = Copies()
        self.last_copies = copies
        if not targets:
            return copies
        size = InSwapper.input_size
        t0 = time.perf_counter()
        frame = self._upload(image)
        copies.frame_uploads += 1
        _add_ms(timings, "upload", t0)
        for target in targets:
            if not 0 <= target.identity < len(self._latents):
                raise ValueError(
                    f"swap target asks for identity {target.identity}; this run has {len(self._latents)}"
                )
            t0 = time.perf_counter()
            m = estimate_norm(target.kps, size)
            crop = self.ops.crop_for_inswapper(frame, m, fp16=self._fp16)
            copies.add_params(1, _THETA_BYTES)
            (swapped,) = self.swapper.run({TARGET_NAME: crop, SOURCE_NAME: self._latents[target.identity]})
            _add_ms(timings, "swap", t0)
            t0 = time.perf_counter()
            mask = compositor.crop_mask(size, m)
            self.ops.paste(frame, swapped, mask, m, opacity=opacity * target.weight)
            copies.add_params(2, _THETA_BYTES + mask.size * 4)
            _add_ms(timings, "paste", t0)
        t0 = time.perf_counter()
        np.copyto(image, np.asarray(frame.numpy()))  # the one download
        copies.downloads += 1
        copies.download_bytes += int(image.nbytes)
        _add_ms(timings, "download", t0)
        return copies

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
