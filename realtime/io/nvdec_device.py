"""NVDEC's side of the GPU: whether PyNvVideoCodec is there, the CUDA driver calls FaceCast makes
through ctypes, and the NV12 frames it owns on the device (copied out of the decoder's surfaces,
downloaded to BGR only when a CPU consumer reads them). See realtime.io.nvdec for the sources.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import threading
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from models.ops.yuv import BT601_LIMITED, YuvColour, nv12_to_bgr_host
from models.types import ImageBGR
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame

MAX_FRAMES_BEHIND = 8  # decoded frames a source holds before read() is called (NVDEC may emit bursts)


# ------------------------------------------------------------------------------------ availability


def nvdec_available() -> tuple[bool, str]:
    """(True, version) when PyNvVideoCodec imports, else (False, the first line of its error).

    The import itself fails without an NVIDIA driver (RuntimeError: "Failed to load NVENC library:
    libnvidia-encode.so.1: ...") or on platforms without a wheel (ImportError).
    """
    try:
        nvc = importlib.import_module("PyNvVideoCodec")
    except (RuntimeError, ImportError) as err:
        return False, first_line(err)
    return True, f"PyNvVideoCodec {getattr(nvc, '__version__', '(unknown version)')}"


def import_nvc() -> ModuleType:
    try:
        return importlib.import_module("PyNvVideoCodec")
    except (RuntimeError, ImportError) as err:
        raise SourceError(
            f"NVDEC is not available: {first_line(err)}",
            hint="Install the NVIDIA driver (with the video capabilities in Docker: "
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video), or decode on the CPU.",
        ) from err


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def nvc_errors(nvc: ModuleType | None) -> tuple[type[BaseException], ...]:
    """What PyNvVideoCodec's calls raise: its own PyNvVCException types, which derive from
    Exception and NOT from RuntimeError (2.2.4), plus RuntimeError/ValueError (argument checks, the
    CUDA driver). Catching only RuntimeError would let a decoder or encoder failure crash the app."""
    own = [getattr(nvc, name, None) for name in ("PyNvVCException", "PyNvVCExceptionUnsupported")]
    return (RuntimeError, ValueError, *(t for t in own if isinstance(t, type) and issubclass(t, Exception)))


# ------------------------------------------------------------------------------------- CUDA driver


class CudaDriver(Protocol):
    """The few CUDA operations this module needs (tests substitute a host-memory fake)."""

    def stream_create(self) -> int: ...

    def stream_synchronize(self, stream: int) -> None: ...

    def stream_destroy(self, stream: int) -> None: ...

    def alloc(self, nbytes: int) -> int: ...

    def free(self, ptr: int) -> None: ...

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: int) -> None: ...

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int) -> None: ...

    def copy_htod(self, dst: int, src_host: int, nbytes: int) -> None: ...

    def mem_get_info(self) -> tuple[int, int]: ...


class CtypesCudaDriver:
    """CudaDriver on the CUDA driver API (libcuda.so.1 / nvcuda.dll), in the device's primary
    context: the one ONNX Runtime's CUDA provider and PyNvVideoCodec (cudacontext=0) use too."""

    _CU_STREAM_NON_BLOCKING = 1  # does not synchronise with the legacy default stream

    def __init__(self, gpu_id: int = 0) -> None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        try:
            self._cuda = ctypes.CDLL(name)
        except OSError as err:
            raise RuntimeError(f"no CUDA driver ({name}): {err}") from err
        c = self._cuda
        u64, p64 = ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
        c.cuMemAlloc_v2.argtypes = [p64, ctypes.c_size_t]
        c.cuMemFree_v2.argtypes = [u64]
        c.cuMemcpyDtoDAsync_v2.argtypes = [u64, u64, ctypes.c_size_t, ctypes.c_void_p]
        c.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, u64, ctypes.c_size_t]
        c.cuMemcpyHtoD_v2.argtypes = [u64, ctypes.c_void_p, ctypes.c_size_t]
        c.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        c.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        c.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        dev = ctypes.c_int()
        ctx = ctypes.c_void_p()
        self._check("cuInit", c.cuInit(0))
        self._check("cuDeviceGet", c.cuDeviceGet(ctypes.byref(dev), gpu_id))
        self._check("cuDevicePrimaryCtxRetain", c.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        self._ctx = ctx
        self.gpu_id = gpu_id

    def _check(self, what: str, status: int) -> None:
        if status != 0:
            name = ctypes.c_char_p()
            self._cuda.cuGetErrorName(status, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: {(name.value or b'CUDA error').decode()} ({status})")

    def _current(self) -> None:
        # A context is current per thread; sources, workers and finalizers run on different threads.
        self._check("cuCtxSetCurrent", self._cuda.cuCtxSetCurrent(self._ctx))

    def stream_create(self) -> int:
        self._current()
        stream = ctypes.c_void_p()
        flags = self._CU_STREAM_NON_BLOCKING
        self._check("cuStreamCreate", self._cuda.cuStreamCreate(ctypes.byref(stream), flags))
        return int(stream.value or 0)

    def stream_synchronize(self, stream: int) -> None:
        self._current()
        self._check("cuStreamSynchronize", self._cuda.cuStreamSynchronize(ctypes.c_void_p(stream)))

    def stream_destroy(self, stream: int) -> None:
        self._current()
        self._check("cuStreamDestroy", self._cuda.cuStreamDestroy_v2(ctypes.c_void_p(stream)))

    def alloc(self, nbytes: int) -> int:
        self._current()
        ptr = ctypes.c_uint64()
        self._check("cuMemAlloc", self._cuda.cuMemAlloc_v2(ctypes.byref(ptr), nbytes))
        return int(ptr.value)

    def free(self, ptr: int) -> None:
        self._current()
        self._check("cuMemFree", self._cuda.cuMemFree_v2(ptr))

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._current()
        self._check(
            "cuMemcpyDtoDAsync", self._cuda.cuMemcpyDtoDAsync_v2(dst, src, nbytes, ctypes.c_void_p(stream))
        )

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int) -> None:
        self._current()
        self._check("cuMemcpyDtoH", self._cuda.cuMemcpyDtoH_v2(ctypes.c_void_p(dst_host), src, nbytes))

    def copy_htod(self, dst: int, src_host: int, nbytes: int) -> None:
        self._current()
        self._check("cuMemcpyHtoD", self._cuda.cuMemcpyHtoD_v2(dst, ctypes.c_void_p(src_host), nbytes))

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of device memory, as every process sees it (like nvidia-smi)."""
        self._current()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._check("cuMemGetInfo", self._cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
        return int(free.value), int(total.value)


# ------------------------------------------------------------------------------ device NV12 frames


class DeviceNV12:
    """An NV12 picture in GPU memory owned by FaceCast: Y rows then interleaved UV rows, `pitch`
    bytes apart (pitch == width unless the decoder padded its rows).

    The memory goes back to its pool when the last reference to this object is dropped. Its
    `__cuda_array_interface__` (shape (1.5 H, W), uint8) lets torch/CuPy wrap it; `cuda()` gives the
    per-plane views NVENC accepts as input (docs/gpu-api-facts.md §1, "Encoder").
    """

    __slots__ = ("__weakref__", "colour", "gpu_id", "height", "pitch", "ptr", "width")

    def __init__(
        self,
        ptr: int,
        width: int,
        height: int,
        pitch: int,
        gpu_id: int,
        release: Callable[[], None],
        colour: YuvColour = BT601_LIMITED,
    ) -> None:
        self.ptr = ptr
        self.width = width
        self.height = height
        self.pitch = pitch
        self.gpu_id = gpu_id
        self.colour = colour  # the stream's YUV matrix and range: how to turn this into BGR
        weakref.finalize(self, release)

    @property
    def nbytes(self) -> int:
        return self.pitch * self.height * 3 // 2

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        # No "stream" entry: the copy that filled this buffer was synchronised before it was handed out.
        return {
            "shape": (self.height * 3 // 2, self.width),
            "strides": (self.pitch, 1),
            "typestr": "|u1",
            "data": (self.ptr, False),
            "version": 3,
        }

    def cuda(self) -> list[_PlaneView]:
        h, w, p = self.height, self.width, self.pitch
        return [
            _PlaneView(self.ptr, (h, w, 1), (p, 1, 1)),
            _PlaneView(self.ptr + p * h, (h // 2, w // 2, 2), (p, 2, 1)),
        ]


class _PlaneView:
    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "strides": strides,
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
        }


class _BufferPool:
    """Reuses device buffers of one size: cuMemAlloc/cuMemFree per frame would stall the decoder."""

    def __init__(self, driver: CudaDriver, keep: int = MAX_FRAMES_BEHIND) -> None:
        self._driver = driver
        self._keep = keep
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()  # buffers come back from finalizers on any thread
        self._closed = False

    def get(self, nbytes: int) -> int:
        with self._lock:
            spare = self._free.get(nbytes)
            if spare:
                return spare.pop()
        return self._driver.alloc(nbytes)

    def put(self, nbytes: int, ptr: int) -> None:
        with self._lock:
            spare = self._free.setdefault(nbytes, [])
            if not self._closed and len(spare) < self._keep:
                spare.append(ptr)
                return
        self._driver.free(ptr)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ptrs = [p for spare in self._free.values() for p in spare]
            self._free.clear()
        for ptr in ptrs:
            self._driver.free(ptr)


class SurfaceCopier:
    """Copies decoded surfaces into FaceCast-owned NV12 buffers, and downloads them on request.

    Counts what it moves across PCIe (`downloads`): benchmarks report copies per frame.
    """

    def __init__(self, driver: CudaDriver, gpu_id: int = 0) -> None:
        self.driver = driver
        self.gpu_id = gpu_id
        self.stream = driver.stream_create()
        self._pool = _BufferPool(driver)
        self.clones = 0
        self.downloads = 0

    def clone(self, frame: Any, colour: YuvColour = BT601_LIMITED) -> DeviceNV12:
        """A copy of a decoded frame that stays valid after the decoder reuses its surface."""
        # __dlpack__(stream) makes `stream` wait for this frame's decode event (cuStreamWaitEvent);
        # 0 is refused by PyNvVideoCodec, so the copier's own non-default stream is passed. The
        # capsule itself is not needed: the pointers come from the per-plane CUDA array interfaces.
        frame.__dlpack__(stream=self.stream)
        planes = frame.cuda()
        y, uv = (plane.__cuda_array_interface__ for plane in planes[:2])
        height, width = int(y["shape"][0]), int(y["shape"][1])
        if len(planes) != 2 or y["typestr"] != "|u1" or int(uv["shape"][0]) != (height + 1) // 2:
            # P016 (10-bit) has 16-bit planes, 4:4:4 three full planes: NV12 maths would be garbage.
            raise RuntimeError(
                f"the decoded picture is not 8-bit 4:2:0 NV12 ({len(planes)} planes, {y['typestr']})"
            )
        pitch = int(y["strides"][0]) if y.get("strides") else width
        uv_pitch = int(uv["strides"][0]) if uv.get("strides") else width
        if uv_pitch != pitch:
            raise RuntimeError(f"unexpected NV12 layout: Y pitch {pitch}, UV pitch {uv_pitch}")
        y_ptr, uv_ptr = int(y["data"][0]), int(uv["data"][0])
        luma = pitch * height
        total = luma * 3 // 2
        dst = self._pool.get(total)
        if uv_ptr == y_ptr + luma:
            self.driver.copy_dtod_async(dst, y_ptr, total, self.stream)  # planes are contiguous
        else:
            self.driver.copy_dtod_async(dst, y_ptr, luma, self.stream)
            self.driver.copy_dtod_async(dst + luma, uv_ptr, total - luma, self.stream)
        # Synchronised here, on the decode thread: the buffer is then safe for any consumer stream,
        # and the decoder may overwrite its surface as soon as Decode() is called again.
        self.driver.stream_synchronize(self.stream)
        self.clones += 1
        pool = self._pool
        return DeviceNV12(dst, width, height, pitch, self.gpu_id, lambda: pool.put(total, dst), colour)

    def download_nv12(self, buf: DeviceNV12) -> npt.NDArray[np.uint8]:
        """The NV12 picture on the host, (1.5 H, W) uint8: one device-to-host copy."""
        host = np.empty((buf.height * 3 // 2, buf.pitch), np.uint8)
        self.driver.copy_dtoh(host.ctypes.data, buf.ptr, host.nbytes)
        self.downloads += 1
        return host[:, : buf.width] if buf.pitch != buf.width else host

    def download_bgr(self, buf: DeviceNV12) -> ImageBGR:
        nv12 = np.ascontiguousarray(self.download_nv12(buf))
        # In the stream's own matrix and range, as the CPU sources (PyAV) convert it.
        return nv12_to_bgr_host(nv12, buf.colour)

    def close(self) -> None:
        self._pool.close()
        self.driver.stream_destroy(self.stream)


_IMAGE_SLOT = VideoFrame.__dict__["image"]  # VideoFrame's slot descriptor (read-only lookup)


class DeviceVideoFrame(VideoFrame):
    """A VideoFrame whose picture is on the GPU (`device`, NV12). `image` is made on first access
    (one download + BT.601 conversion) and then kept, so CPU stages still see a normal BGR frame.

    A frame is used by one stage at a time (the engine hands it along), so the lazy fill needs no lock.
    """

    __slots__ = ("_download", "device")

    def __init__(
        self,
        device: DeviceNV12,
        index: int,
        capture_ts: float,
        pts: float | None,
        download: Callable[[DeviceNV12], ImageBGR],
    ) -> None:
        # VideoFrame.__init__ is not called: it would need the BGR image this class defers.
        self.device = device
        self._download = download
        self.index = index
        self.capture_ts = capture_ts
        self.pts = pts
        self.prepared = None
        self.marked = False

    @property
    def image(self) -> ImageBGR:
        try:
            return _IMAGE_SLOT.__get__(self, type(self))
        except AttributeError:
            image = self._download(self.device)
            _IMAGE_SLOT.__set__(self, image)
            return image

    @image.setter
    def image(self, value: ImageBGR) -> None:
        _IMAGE_SLOT.__set__(self, value)

    @property
    def device_picture(self) -> DeviceNV12:
        return self.device

    @property
    def image_loaded(self) -> bool:
        """True once a CPU consumer asked for `image` (from then on `device` may be stale)."""
        try:
            _IMAGE_SLOT.__get__(self, type(self))
        except AttributeError:
            return False
        return True

    @property
    def width(self) -> int:
        return self.device.width

    @property
    def height(self) -> int:
        return self.device.height

    def __repr__(self) -> str:  # the dataclass repr would read `image`, i.e. download the frame
        return (
            f"DeviceVideoFrame(index={self.index}, {self.width}x{self.height} NV12 on GPU "
            f"{self.device.gpu_id}, pts={self.pts}, image_loaded={self.image_loaded})"
        )
