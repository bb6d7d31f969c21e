"""The image ops that sit between models, run on the session's device: crops, NV12 -> BGR, pastes.

On CUDA/TensorRT, a crop done with OpenCV means: download the frame, warp on the CPU, upload the
crop, and the same again for the paste-back. `DeviceOps` runs tiny ONNX graphs
(models.ops.device_graphs) for the same work on the session's device with IOBinding
(models.runtime.iobinding), so a frame is uploaded once (or decoded on the GPU as NV12) and only
the finished frame comes back. Without the graphs it runs their OpenCV twins
(models.ops.device_twins), the CPU production path: OpenCV is far faster there (docs/ARCHITECTURE.md).
The crop specs and geometry are models.ops.crop_geometry; the graphs' GPU rules are
models.ops.graph_rules. Their names stay importable from here.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort

from models.ops.align import Matrix2x3, invert_affine
from models.ops.crop_geometry import (
    ARCFACE_CROP,
    CropSpec,
    checked_affine,
    paste_box,
    sample_box,
    shift_source,
    shift_target,
)
from models.ops.device_graphs import (
    build_mark,
    build_nv12_to_bgr,
    build_paste_blend,
    build_warp_crop,
)
from models.ops.device_twins import (
    paste_blend_cv2,
    warp_crop_cv2,
)
from models.ops.yuv import BT601_LIMITED, YuvColour, nv12_to_bgr_host
from models.runtime.iobinding import BoundSession, TensorView, numpy_dtype
from models.runtime.session import SessionFactory
from models.types import Box, FloatArray, ImageBGR

log = logging.getLogger(__name__)

Frame: TypeAlias = "npt.NDArray[np.uint8] | Any"  # numpy on the host, or an ort.OrtValue


# --------------------------------------------------------------------------------------------
# Runners: one graph, its session and its reused buffers each
# --------------------------------------------------------------------------------------------


def _shape_of(value: Frame | TensorView) -> tuple[int, ...]:
    """Shape of a numpy array, a TensorView (a device buffer bound by pointer) or an OrtValue."""
    if isinstance(value, np.ndarray | TensorView):
        return tuple(int(d) for d in value.shape)
    return tuple(int(d) for d in value.shape())


def _frame_hw(frame: Frame) -> tuple[int, int]:
    shape = tuple(frame.shape) if isinstance(frame, np.ndarray) else tuple(frame.shape())
    dtype = frame.dtype if isinstance(frame, np.ndarray) else numpy_dtype(frame)
    if len(shape) != 3 or shape[2] != 3 or dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 frame, got {shape} {dtype}")
    return int(shape[0]), int(shape[1])


class _Runner:
    """A graph's session (through the SessionFactory: same providers, same fallback reports) bound
    with IOBinding on the session's real device."""

    def __init__(self, factory: SessionFactory, model: onnx.ModelProto, label: str) -> None:
        session = factory.create(model.SerializeToString(), label=label)
        self.bound = BoundSession(session, factory.device_type, factory.config.device_id)

    @property
    def device_type(self) -> str:
        return self.bound.device_type


class _Scratch:
    """A growing host buffer handed out as contiguous views (the cut-out a graph reads)."""

    def __init__(self) -> None:
        self._buf = np.empty(0, dtype=np.uint8)

    def copy_of(self, src: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        n = src.size
        if self._buf.size < n:
            self._buf = np.empty(n, dtype=np.uint8)
        view = self._buf[:n].reshape(src.shape)
        np.copyto(view, src)
        return view


class WarpCrop(_Runner):
    """Runs a warp_crop graph. The output OrtValue [1,3,S,S] is one buffer reused by every call."""

    def __init__(self, factory: SessionFactory, spec: CropSpec) -> None:
        super().__init__(factory, build_warp_crop(spec), f"warp_crop_{spec.size}")
        self.spec = spec
        self._theta = np.zeros((2, 3), dtype=np.float32)
        self._scratch = _Scratch()

    def run(self, frame: Frame, m: Matrix2x3, *, roi: bool = True, out: Any = None) -> Any:
        """The crop of `frame` (numpy or OrtValue) through `m` (frame->crop), as an OrtValue: `out`
        (an OrtValue of the crop's shape on the graph's device) when given, else the runner's one
        reused buffer.

        With roi (the default) the graph only sees the pixels the crop can read: a numpy frame is
        cut to that rectangle (a small host copy), an OrtValue frame to its band of whole rows
        (contiguous, so bound by pointer with no copy); theta is shifted to match. roi=False feeds
        the whole frame (tests, timings).
        """
        h, w = _frame_hw(frame)
        mat = checked_affine(m)
        box = sample_box(mat, self.spec.size, h, w) if roi else Box(0, 0, w, h)
        feed: Any
        if isinstance(frame, np.ndarray):
            cut = frame[box.y0 : box.y1, box.x0 : box.x1]
            feed = cut if cut.flags.c_contiguous else self._scratch.copy_of(cut)
            dx, dy = box.x0, box.y0
        else:
            full = (box.y0, box.y1) == (0, h)
            feed = frame if full else TensorView.rows(frame, box.y0, box.y1)
            dx, dy = 0, box.y0
        np.copyto(self._theta, shift_source(mat, dx, dy), casting="same_kind")
        self.bound.bind_output("crop", out)
        return self.bound.run({"frame": feed, "theta": self._theta})[0]


class Nv12ToBgr(_Runner):
    """Runs the NV12 -> BGR graph for one resolution; the output [h,w,3] buffer is reused."""

    def __init__(
        self, factory: SessionFactory, height: int, width: int, colour: YuvColour = BT601_LIMITED
    ) -> None:
        graph = build_nv12_to_bgr(height, width, colour)
        super().__init__(factory, graph, f"nv12_to_bgr_{width}x{height} ({colour})")
        self.height, self.width, self.colour = height, width, colour

    def run(self, nv12: Frame | TensorView) -> Any:
        shape = _shape_of(nv12)
        if shape != (self.height * 3 // 2, self.width):
            raise ValueError(f"expected NV12 of shape {(self.height * 3 // 2, self.width)}, got {shape}")
        return self.bound.run({"nv12": nv12})[0]


class PasteBlend(_Runner):
    """Runs the paste_blend graph. The region is dynamic, so its output is allocated per run unless
    `out` is given (an OrtValue or TensorView; it may be the region itself: see DeviceOps.paste)."""

    def __init__(self, factory: SessionFactory, size: int, *, signed: bool = False) -> None:
        label = f"paste_blend_{size}{'_signed' if signed else ''}"
        super().__init__(factory, build_paste_blend(size, signed=signed), label)
        self.size = size
        self.signed = signed
        self._theta = np.zeros((2, 3), dtype=np.float32)

    def run(
        self,
        region: Frame | TensorView,
        crop: npt.NDArray[np.float32] | Any,
        mask: FloatArray | Any,
        theta_inv: Matrix2x3,
        *,
        out: Any | None = None,
    ) -> Any:
        np.copyto(self._theta, checked_affine(theta_inv), casting="same_kind")
        self.bound.bind_output("blended", out)
        return self.bound.run({"region": region, "crop": crop, "mask": mask, "theta_inv": self._theta})[0]


# --------------------------------------------------------------------------------------------
# Facade
# --------------------------------------------------------------------------------------------


class MarkApply(_Runner):
    """Runs the mark graph for one frame size (its cell grid); the output is reused unless `out` is
    given (an OrtValue of the frame's shape: the frame itself marks it in place)."""

    def __init__(self, factory: SessionFactory, row_of: npt.ArrayLike, col_of: npt.ArrayLike) -> None:
        rows, cols = np.asarray(row_of, np.int64), np.asarray(col_of, np.int64)
        super().__init__(factory, build_mark(rows, cols), f"mark_{cols.size}x{rows.size}")
        self.height, self.width = int(rows.size), int(cols.size)
        self._cells = np.zeros((int(rows.max()) + 1, int(cols.max()) + 1), np.float32)

    def run(self, frame: Frame, cells: npt.ArrayLike, *, out: Any = None) -> Any:
        h, w = _frame_hw(frame)
        if (h, w) != (self.height, self.width):
            raise ValueError(f"this mark is for {self.width}x{self.height} frames, not {w}x{h}")
        np.copyto(self._cells, np.asarray(cells), casting="unsafe")
        self.bound.bind_output("marked", out)
        return self.bound.run({"frame": frame, "cells": self._cells})[0]


class DeviceOps:
    """The between-model image ops of one worker (one instance per worker thread).

    `use_graphs` (default: whenever the factory asks for CUDA/TensorRT) runs the ONNX graphs on
    the session's device with IOBinding; the graphs are built once, on first use, and kept. Without
    it the OpenCV twins run instead (the CPU production path; much faster than the graphs there).
    If CUDA was asked for but did not load, the default switches to the OpenCV twins after the
    first graph reveals it. Either way the crop results are OrtValues (zero-copy wrappers on the
    host path), so the next model binds them directly. Results live in reused buffers: each is
    valid until the same op runs again. Under a TensorRT factory the graphs run on the CUDA
    provider unless `allow_tensorrt` (see __init__).
    """

    def __init__(
        self, factory: SessionFactory, *, use_graphs: bool | None = None, allow_tensorrt: bool = False
    ) -> None:
        if factory.config.provider == "tensorrt" and not allow_tensorrt:
            # The graphs are TensorRT-legal, but their inputs change shape every frame (the face's
            # rows), and TensorRT rebuilds an engine whenever a shape leaves its profile. They are
            # memory-bound anyway: the CUDA provider runs them with no build step.
            # dataclasses.replace keeps every other field (the shared fallbacks list, the clock).
            factory = replace(factory, config=replace(factory.config, provider="cuda"))
        if factory.config.tf32 and factory.config.provider == "cuda":
            # Exact float32 MatMuls: the affine maths (inverse, sampling grid, colour matrix) in
            # TF32 would shift crops and pastes by up to a pixel against the OpenCV twins.
            factory = replace(factory, config=replace(factory.config, tf32=False))
        self.factory = factory
        self._auto = use_graphs is None
        self.use_graphs: bool = factory.device_type != "cpu" if use_graphs is None else use_graphs
        self._crops: dict[CropSpec, WarpCrop] = {}
        self._nv12: Nv12ToBgr | None = None
        self._pastes: dict[tuple[int, bool], PasteBlend] = {}  # by (crop size, signed)
        self._mark: MarkApply | None = None  # for the newest frame size
        self._host_crops: dict[CropSpec, npt.NDArray[Any]] = {}
        self._host_bgr: ImageBGR | None = None
        self._scratch = _Scratch()

    @property
    def device_type(self) -> str:
        """Where the results live: the graphs' device, or 'cpu' on the OpenCV path."""
        if not self.use_graphs:
            return "cpu"
        for runner in [*self._crops.values(), *self._pastes.values(), self._nv12]:
            if runner is not None:
                return runner.device_type
        return self.factory.device_type

    def _adopt(self, runner: _Runner) -> None:
        if self._auto and runner.bound.fell_back:
            # CUDA asked for but the session runs on the CPU: the graphs would be correct but 10-80x
            # slower than OpenCV there, so later calls take the OpenCV path.
            log.info("device ops: %s runs on the CPU; using the OpenCV path", type(runner).__name__)
            self.use_graphs = False

    # -- crops -------------------------------------------------------------------------------

    def crop(self, frame: Frame, m: Matrix2x3, spec: CropSpec, *, out: Any = None) -> Any:
        """The aligned, preprocessed crop [1,3,S,S] of `frame` through `m` (frame->crop). out: an
        OrtValue of that shape to write it into (a face's own slot), else one reused buffer."""
        if self.use_graphs:
            runner = self._crops.get(spec)
            if runner is None:
                runner = self._crops[spec] = WarpCrop(self.factory, spec)
                self._adopt(runner)
            return runner.run(frame, m, out=out)
        if out is not None:
            if out.device_name().lower() != "cpu":
                raise ValueError("the OpenCV crops write host memory: pass a host OrtValue as `out`")
            warp_crop_cv2(self._host_frame(frame), m, spec, out=np.asarray(out.numpy()))  # a view
            return out
        buf = self._host_crops.get(spec)
        if buf is None:
            dtype = np.float16 if spec.fp16 else np.float32
            buf = self._host_crops[spec] = np.empty((1, 3, spec.size, spec.size), dtype=dtype)
        warp_crop_cv2(self._host_frame(frame), m, spec, out=buf)
        return ort.OrtValue.ortvalue_from_numpy(buf)

    def crop_for_inswapper(self, frame: Frame, m: Matrix2x3, *, fp16: bool = False) -> Any:
        return self.crop(frame, m, CropSpec(128, rgb=True, scale=1.0 / 255.0, fp16=fp16))

    def crop_for_arcface(self, frame: Frame, m: Matrix2x3) -> Any:
        return self.crop(frame, m, ARCFACE_CROP)

    # -- colour ------------------------------------------------------------------------------

    def nv12_to_bgr(self, nv12: Frame | TensorView, colour: YuvColour = BT601_LIMITED) -> Any:
        """BGR [h,w,3] uint8 of an NV12 [3h/2, w] frame in the stream's `colour` (matrix, range)
        (graph: on the device; else the CPU twin). A TensorView (e.g. a decoder's picture bound by
        pointer) needs the graphs."""
        rows, width = _shape_of(nv12)
        height = int(rows) * 2 // 3
        if not self.use_graphs:
            if isinstance(nv12, TensorView):
                raise ValueError("a picture bound by pointer needs the device graphs (use_graphs)")
            if self._host_bgr is None or self._host_bgr.shape != (height, int(width), 3):
                self._host_bgr = np.empty((height, int(width), 3), dtype=np.uint8)
            nv12_to_bgr_host(self._host_frame(nv12), colour, out=self._host_bgr)
            return ort.OrtValue.ortvalue_from_numpy(self._host_bgr)
        current = self._nv12
        if current is None or (current.height, current.width, current.colour) != (height, int(width), colour):
            self._nv12 = Nv12ToBgr(self.factory, height, int(width), colour)
            self._adopt(self._nv12)
        assert self._nv12 is not None
        return self._nv12.run(nv12)

    # -- paste-back --------------------------------------------------------------------------

    def paste(
        self,
        frame: Frame,
        swapped: npt.NDArray[np.float32] | Any,
        mask: FloatArray,
        m: Matrix2x3,
        *,
        opacity: float = 1.0,
        signed: bool = False,
        limit: Box | None = None,
    ) -> None:
        """Blend the swapped crop ([1,3,S,S] RGB in [0,1], aligned by `m`: frame->crop) into `frame`
        in place, through the crop-space `mask` (realtime.face.host.compositor's Compositor.crop_mask).
        signed: the crop is a restorer's output, RGB in [-1, 1]. limit: a part of the frame the
        mask is known to be zero beyond (the restorer's crop is larger than the face it pastes).

        Only the paste region is touched. A numpy frame: the region is cut out, blended, written
        back. An OrtValue frame (on the device): its band of whole rows is bound by pointer as both
        the graph's input and its output, so the blend happens in place with no copy; this is safe
        because the region is read by the graph's first node only, before its last node writes.
        """
        h, w = _frame_hw(frame)
        mat = checked_affine(m)
        size = int(tuple(swapped.shape if isinstance(swapped, np.ndarray) else swapped.shape())[-1])
        box = paste_box(mat, size, h, w)
        if limit is not None:
            box = box.intersect(limit)
        if box.empty or opacity <= 0.0:
            return
        alpha = np.asarray(mask, dtype=np.float32)
        if opacity < 1.0:
            alpha = alpha * np.float32(opacity)
        if not self.use_graphs:
            host = self._host_frame(frame)  # a view for numpy and CPU OrtValues: written in place
            roi = host[box.y0 : box.y1, box.x0 : box.x1]
            crop = swapped if isinstance(swapped, np.ndarray) else swapped.numpy()
            theta = shift_target(invert_affine(mat), box.x0, box.y0)
            roi[:] = paste_blend_cv2(roi, crop, alpha, theta, signed=signed)
            if not isinstance(frame, np.ndarray) and frame.device_name().lower() != "cpu":
                # numpy() of a device frame is a host copy: the blend must go back, or it is lost.
                frame.update_inplace(host)
            return
        runner = self._pastes.get((size, signed))
        if runner is None:
            runner = self._pastes[(size, signed)] = PasteBlend(self.factory, size, signed=signed)
            self._adopt(runner)
        if isinstance(frame, np.ndarray):
            region = self._scratch.copy_of(frame[box.y0 : box.y1, box.x0 : box.x1])
            theta_inv = shift_target(invert_affine(mat), box.x0, box.y0)
            blended = runner.run(region, swapped, alpha, theta_inv)
            frame[box.y0 : box.y1, box.x0 : box.x1] = blended.numpy()
        else:
            band = TensorView.rows(frame, box.y0, box.y1)
            runner.run(band, swapped, alpha, shift_target(invert_affine(mat), 0, box.y0), out=band)

    # -- the watermark ---------------------------------------------------------------------------

    def mark(self, frame: Frame, cells: npt.ArrayLike, row_of: npt.ArrayLike, col_of: npt.ArrayLike) -> None:
        """Add the watermark's cell offsets (`cells` [R,C], grey levels; `row_of`/`col_of`: each
        pixel row's and column's cell) to `frame` in place, on the frame's own device: a device
        frame is marked before its one download. Without the graphs, numpy on the host frame."""
        if not self.use_graphs:
            host = self._host_frame(frame)
            offsets = np.asarray(cells, np.int16)[np.asarray(row_of)[:, None], np.asarray(col_of)[None, :]]
            np.clip(host + offsets[:, :, None], 0, 255, out=host, casting="unsafe")
            if not isinstance(frame, np.ndarray) and frame.device_name().lower() != "cpu":
                frame.update_inplace(host)
            return
        h, w = _frame_hw(frame)
        runner = self._mark
        if runner is None or (runner.height, runner.width) != (h, w):
            runner = self._mark = MarkApply(self.factory, row_of, col_of)
            self._adopt(runner)
        if isinstance(frame, np.ndarray):
            np.copyto(frame, runner.run(frame, cells).numpy())
        else:
            runner.run(frame, cells, out=frame)

    @staticmethod
    def _host_frame(frame: Frame) -> npt.NDArray[np.uint8]:
        # OrtValue.numpy() of a CPU OrtValue is a view of its memory (checked on ORT 1.31).
        return frame if isinstance(frame, np.ndarray) else np.asarray(frame.numpy())


__all__ = [
    "DeviceOps",
    "Frame",
    "MarkApply",
    "Nv12ToBgr",
    "PasteBlend",
    "WarpCrop",
]
