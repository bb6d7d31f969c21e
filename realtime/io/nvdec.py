"""NVDEC sources: H.264/HEVC decoded by the GPU into GPU memory, behind the FrameSource protocol.

PyNvVideoCodec (GPU_API_NOTES.md §1) decodes into NV12 surfaces that belong to the decoder and are
reused by later Decode() calls. Each decoded surface is therefore copied at once into a buffer that
FaceCast owns (`DeviceNV12`), after making the copy wait for the decoder's per-frame event. Frames
are handed out as `DeviceVideoFrame`: a VideoFrame whose `device` is that NV12 buffer, and whose
`image` (BGR on the host) is only made when a CPU consumer reads it: one download plus one colour
conversion, once per frame. A GPU pipeline (models/runtime/iobinding.py) binds `device.ptr` instead.

The CUDA work needed here (a stream, device copies, one download) goes through the CUDA driver API
with ctypes, so neither torch nor CuPy is required.

- NvdecFileSource: a video file, demuxed by PyNvVideoCodec's own demuxer.
- NvdecStreamSource: a network stream (RTSP, RTMP, HTTP, SRT, UDP) or a camera that sends H.264
  (/dev/videoN via V4L2, DirectShow), read as compressed packets with PyAV and fed to NVDEC in low
  latency mode.
- open_gpu_source: the NVDEC source where it can work, else realtime.io.sources.open_source, plus a
  sentence saying which and why; open_input: that with the decoder asked for (the NVDEC side of
  the input router, realtime.io.inputs.open_input).

Nothing in this module has run on a GPU yet: see docs/GPU.md, "Not verified on a GPU".
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import av
import av.bitstream
import av.error
import numpy as np
import numpy.typing as npt

from models.ops.yuv import BT601_LIMITED, YuvColour, colour_of, nv12_to_bgr_host
from models.types import ImageBGR
from realtime.core.contracts import FrameSource
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame
from realtime.io.inputs import Decoder
from realtime.io.sources import (
    DEFAULT_FPS,
    GAP_S,
    IMAGE_EXTENSIONS,
    FallbackSource,
    KnownFormat,
    Pacer,
    camera_index,
    open_source,
    playback_mode,
    require_video_file,
)

log = logging.getLogger(__name__)

NVDEC_CODECS = ("h264", "hevc")
ANNEXB_START_CODES = (b"\x00\x00\x00\x01", b"\x00\x00\x01")
# 8-bit 4:2:0 decodes to NV12; 10-bit (P016) and 4:4:4 would need other conversions.
NVDEC_PIXEL_FORMATS = frozenset({"yuv420p", "yuvj420p", "nv12"})
STREAM_SCHEMES = (
    "rtsp://",
    "rtsps://",
    "rtmp://",
    "rtmps://",
    "http://",
    "https://",
    "srt://",
    "udp://",
    "tcp://",
)
# Options that keep libavformat from buffering a live input (each one costs latency otherwise).
LOW_DELAY_OPTIONS: Mapping[str, str] = {"fflags": "nobuffer", "flags": "low_delay"}
_MAX_FRAMES_BEHIND = 8  # decoded frames a source holds before read() is called (NVDEC may emit bursts)


# ------------------------------------------------------------------------------------ availability


def nvdec_available() -> tuple[bool, str]:
    """(True, version) when PyNvVideoCodec imports, else (False, the first line of its error).

    The import itself fails without an NVIDIA driver (RuntimeError: "Failed to load NVENC library:
    libnvidia-encode.so.1: ...") or on platforms without a wheel (ImportError).
    """
    try:
        nvc = importlib.import_module("PyNvVideoCodec")
    except (RuntimeError, ImportError) as err:
        return False, _first_line(err)
    return True, f"PyNvVideoCodec {getattr(nvc, '__version__', '(unknown version)')}"


def _import_nvc() -> ModuleType:
    try:
        return importlib.import_module("PyNvVideoCodec")
    except (RuntimeError, ImportError) as err:
        raise SourceError(
            f"NVDEC is not available: {_first_line(err)}",
            hint="Install the NVIDIA driver (with the video capabilities in Docker: "
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video), or decode on the CPU.",
        ) from err


def _first_line(err: BaseException) -> str:
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
    per-plane views NVENC accepts as input (GPU_API_NOTES.md §1, "Encoder").
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

    def __init__(self, driver: CudaDriver, keep: int = _MAX_FRAMES_BEHIND) -> None:
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


# ------------------------------------------------------------------------------------------ sources


class _NvdecBase(KnownFormat):
    """What the file and stream sources share: decoder output -> cloned frames -> DeviceVideoFrames."""

    def __init__(self, gpu_id: int, driver: CudaDriver | None, drop_behind: bool) -> None:
        self.gpu_id = gpu_id
        # Live sources keep only the newest frames when the reader falls behind; files keep all.
        self._drop_behind = drop_behind
        self._driver = driver
        self._copier: SurfaceCopier | None = None
        self._nvc: ModuleType | None = None
        self._colour = BT601_LIMITED  # set from the stream's tags at open()
        self._errors: tuple[type[BaseException], ...] = nvc_errors(None)
        self._decoder: Any = None
        self._queue: deque[tuple[DeviceNV12, float | None]] = deque()
        self._size = (0, 0)
        self._fps = 0.0
        self._next_index = 0

    @property
    def copier(self) -> SurfaceCopier | None:
        return self._copier

    @property
    def description(self) -> str:  # overridden by each source
        return f"NVDEC source on GPU {self.gpu_id}"

    def _start(self, what: str) -> ModuleType:
        nvc = _import_nvc()
        driver = self._driver
        if driver is None:
            try:
                driver = CtypesCudaDriver(self.gpu_id)
            except RuntimeError as err:
                raise SourceError(f"{what}: CUDA is not usable for NVDEC ({err}).") from err
        self._nvc = nvc
        self._errors = nvc_errors(nvc)
        self._copier = SurfaceCopier(driver, self.gpu_id)
        return nvc

    def _decode(self, packet: Any, pts_of: Callable[[Any], float | None]) -> None:
        """Decode one packet and clone every frame it produced before the next Decode() call."""
        assert self._decoder is not None and self._copier is not None
        try:
            for frame in self._decoder.Decode(packet):
                self._queue.append((self._copier.clone(frame, self._colour), pts_of(frame)))
        except self._errors as err:
            raise SourceError(f"{self.description}: NVDEC decoding failed ({_first_line(err)}).") from err
        while self._drop_behind and len(self._queue) > _MAX_FRAMES_BEHIND:
            self._queue.popleft()
            log.debug("NVDEC source dropped a frame: the reader fell behind")

    def _frame(self, buf: DeviceNV12, pts: float | None) -> DeviceVideoFrame:
        assert self._copier is not None
        frame = DeviceVideoFrame(buf, self._next_index, time.perf_counter(), pts, self._copier.download_bgr)
        self._next_index += 1
        return frame

    def _release(self) -> None:
        self._queue.clear()
        self._decoder = None
        if self._copier is not None:
            self._copier.close()
            self._copier = None


class NvdecFileSource(_NvdecBase):
    """A video file decoded by NVDEC into GPU memory; paced like a camera when `realtime`."""

    def __init__(
        self,
        path: str | Path,
        gpu_id: int = 0,
        realtime: bool = False,
        loop: bool = False,
        *,
        driver: CudaDriver | None = None,
    ) -> None:
        super().__init__(gpu_id, driver, drop_behind=False)
        self.path = Path(path)
        self.realtime = realtime
        self.loop = loop
        self._pacer = Pacer()
        self._paced_pts: float | None = None
        self._packets: Iterator[Any] = iter(())
        self._flushed = False
        self._timebase = 0.0
        self._last_pts: float | None = None
        self._pass_first_s: float | None = None  # the file's own first timestamp (.ts files: ~1.4 s)
        self._loop_offset_s = 0.0
        self._frames_this_pass = 0

    @property
    def is_live(self) -> bool:
        return self.realtime

    @property
    def description(self) -> str:
        mode = playback_mode(self.realtime, self.loop)
        w, h = self._size
        return f"video file {self.path} (NVDEC on GPU {self.gpu_id}, {w}x{h} @ {self._fps:g} fps{mode})"

    def open(self) -> None:
        require_video_file(self.path)
        self._pacer.rearm()
        nvc = self._start(str(self.path))
        self._colour = _probe_colour(self.path)
        try:
            self._open_demuxer(nvc)
        except self._errors as err:
            self.close()
            raise SourceError(f"NVDEC cannot read {self.path} ({_first_line(err)}).") from err
        first = self._next_decoded()
        if first is None:
            self.close()
            raise SourceError(f"{self.path} contains no frame NVDEC could decode.")
        self._queue.appendleft(first)

    def _open_demuxer(self, nvc: ModuleType) -> None:
        dmx = nvc.CreateDemuxer(str(self.path))
        if int(dmx.BitDepth()) > 8:
            raise ValueError(f"{dmx.BitDepth()}-bit video (only 8-bit 4:2:0 is decoded to NV12 here)")
        self._size = (int(dmx.Width()), int(dmx.Height()))
        rate = float(dmx.FrameRate())
        self._fps = rate if rate > 0 else DEFAULT_FPS
        den = int(dmx.GetTimebaseDen())
        self._timebase = int(dmx.GetTimebaseNum()) / den if den else 0.0
        # usedevicememory=True: without it this overload decodes into host memory (the default).
        self._decoder = nvc.CreateDecoder(
            gpuid=self.gpu_id,
            codec=dmx.GetNvCodecId(),
            cudacontext=0,  # 0 = retain the primary context, the one ONNX Runtime uses
            cudastream=0,  # 0 = the decoder creates its own stream
            usedevicememory=True,
            outputColorType=nvc.OutputColorType.NATIVE,  # NV12 for 8-bit 4:2:0
            latency=nvc.DisplayDecodeLatencyType.NATIVE,  # files may have B-frames: display order
        )
        self._packets = iter(dmx)
        self._flushed = False
        self._frames_this_pass = 0

    def read(self) -> VideoFrame | None:
        if self._decoder is None:
            raise RuntimeError("NvdecFileSource.read() called before open()")
        item = self._next_decoded()
        if item is None:
            return None
        buf, pts = item
        if self.realtime and pts is not None:
            if self._paced_pts is not None and pts - self._paced_pts > max(GAP_S, 3.0 / self._fps):
                self._pacer.reset()  # a jump in the file's time: play on, do not freeze for it
            self._paced_pts = pts
            self._pacer.wait_until(pts)
        return self._frame(buf, pts)

    def interrupt(self) -> None:
        """From another thread: end a real-time wait at once (the run is stopping)."""
        self._pacer.interrupt()

    def close(self) -> None:
        self._packets = iter(())
        self._release()

    def _next_decoded(self) -> tuple[DeviceNV12, float | None] | None:
        assert self._nvc is not None
        while not self._queue:
            packet = next(self._packets, None)
            if packet is not None:
                self._decode(packet, self._pts_of)
                continue
            if not self._flushed:
                # ⚠️ an empty PacketData flushes the frames NVDEC still holds (notes §1).
                self._flushed = True
                self._decode(self._nvc.PacketData(), self._pts_of)
                continue
            if not self.loop or self._frames_this_pass == 0:
                return None
            # A new demuxer and decoder per pass: whether a decoder accepts data after its
            # end-of-stream flush is not documented.
            # The next pass starts one frame after this one ended: its own first timestamp is
            # taken off, or a file that starts at 1.4 s would stall pacing 1.4 s per loop.
            self._loop_offset_s = (self._last_pts or 0.0) + 1.0 / self._fps - (self._pass_first_s or 0.0)
            try:
                self._open_demuxer(self._nvc)
            except self._errors as err:
                raise SourceError(f"NVDEC cannot reopen {self.path} to loop ({_first_line(err)}).") from err
        self._frames_this_pass += 1
        return self._queue.popleft()

    def _pts_of(self, frame: Any) -> float:
        # frame.timestamp echoes the packet's pts in stream time-base units; frames without usable
        # timestamps get the previous one plus a frame period, so pacing never stalls.
        raw = getattr(frame, "timestamp", None)
        pts = None
        if raw is not None and self._timebase:
            own = float(raw) * self._timebase
            if self._pass_first_s is None:
                self._pass_first_s = own
            pts = own + self._loop_offset_s
        if pts is None or (self._last_pts is not None and pts <= self._last_pts):
            pts = (self._last_pts + 1.0 / self._fps) if self._last_pts is not None else 0.0
        self._last_pts = pts
        return pts


def stream_open_args(
    spec: str, width: int | None = None, height: int | None = None, fps: float | None = None
) -> tuple[str, str | None, dict[str, str]]:
    """(file, format, options) for av.open() from a stream URL or an H.264 camera spec.

    - rtsp://…, rtmp://…, http(s)://…, srt://…, udp://…, tcp://…: network streams (RTSP over TCP:
      UDP loses packets on busy Wi-Fi, and a lost packet is a broken picture until the next keyframe);
    - /dev/videoN or v4l2:/dev/videoN: a V4L2 camera asked for its H.264 stream.
    DirectShow cameras (Windows) cannot be asked for H.264 here: FFmpeg's dshow input takes the
    codec only from the ffmpeg tool's -vcodec flag, which PyAV has no way to set (an unknown option
    is dropped silently), so such a camera would always deliver raw video.
    """
    lowered = spec.lower()
    if lowered.startswith(STREAM_SCHEMES):
        options = dict(LOW_DELAY_OPTIONS)
        if lowered.startswith(("rtsp://", "rtsps://")):
            options["rtsp_transport"] = "tcp"
        return spec, None, options
    camera: dict[str, str] = {}
    if width and height:
        camera["video_size"] = f"{width}x{height}"
    if fps:
        camera["framerate"] = f"{fps:g}"
    if lowered.startswith("v4l2:") or lowered.startswith("/dev/video"):
        return spec.removeprefix("v4l2:"), "v4l2", {"input_format": "h264", **camera}
    if lowered.startswith("dshow:"):
        raise SourceError(
            f"{spec}: a DirectShow camera's H.264 stream cannot be requested through PyAV.",
            hint="Use the camera's index instead (e.g. --input 0): OpenCV reads it and the frame is "
            "uploaded to the GPU once.",
        )
    raise SourceError(
        f"Not a stream or H.264 camera: {spec}",
        hint="Use rtsp://, rtmp://, http(s)://, srt://, udp:// or tcp:// URLs, or /dev/videoN (V4L2).",
    )


STREAM_TIMEOUTS_S = (10.0, 5.0)  # PyAV's (open, read) timeouts for streams and cameras


def is_stream_spec(spec: str) -> bool:
    lowered = spec.lower()
    return lowered.startswith((*STREAM_SCHEMES, "v4l2:", "/dev/video", "dshow:"))


class NvdecStreamSource(_NvdecBase):
    """A live H.264/HEVC stream (network or camera) read with PyAV and decoded by NVDEC.

    Packets are converted to Annex B (h264_mp4toannexb / hevc_mp4toannexb: RTMP/FLV and some cameras
    send length-prefixed NAL units; Annex B input passes through unchanged), handed to NVDEC from host
    memory one whole picture at a time (decode_flag = ENDOFPICTURE) with latency=LOW, so each packet
    comes back as a picture at once instead of after NVDEC's display delay.
    """

    def __init__(
        self,
        url_or_camera: str,
        gpu_id: int = 0,
        *,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        options: Mapping[str, str] | None = None,
        driver: CudaDriver | None = None,
        opener: Callable[..., Any] = av.open,
    ) -> None:
        super().__init__(gpu_id, driver, drop_behind=True)
        self.spec = url_or_camera
        self._requested = (width, height, fps)
        self._extra_options = dict(options or {})
        self._opener = opener
        self._container: Any = None
        self._packets: Iterator[Any] = iter(())
        self._bsf: Any = None
        self._codec = ""

    @property
    def is_live(self) -> bool:
        return True

    @property
    def description(self) -> str:
        w, h = self._size
        codec = self._codec or "h264"
        return f"stream {self.spec} ({codec} via NVDEC on GPU {self.gpu_id}, {w}x{h} @ {self._fps:g} fps)"

    def open(self) -> None:
        file, fmt, options = stream_open_args(self.spec, *self._requested)
        options.update(self._extra_options)
        nvc = self._start(self.spec)
        try:
            # Without a timeout a stream that stalls (a dead camera, a NAT dropping the connection)
            # blocks the open or a read for ever; with it FFmpeg gives up and the run says so.
            container = self._opener(file, mode="r", format=fmt, options=options, timeout=STREAM_TIMEOUTS_S)
        except (av.error.FFmpegError, OSError) as err:
            self.close()
            raise SourceError(f"Cannot open {self.spec} ({_first_line(err)}).") from err
        self._container = container
        if not container.streams.video:
            self.close()
            raise SourceError(f"{self.spec} has no video stream.")
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        if codec not in NVDEC_CODECS:
            self.close()
            raise SourceError(
                f"{self.spec} sends {codec}; NVDEC is used here for H.264/HEVC only.",
                hint="Ask the camera/stream for H.264, or use the CPU source.",
            )
        pix_fmt = stream.codec_context.pix_fmt
        if pix_fmt is not None and pix_fmt not in NVDEC_PIXEL_FORMATS:
            self.close()
            raise SourceError(
                f"{self.spec} sends {codec} as {pix_fmt}; NVDEC is used here for 8-bit 4:2:0 only.",
                hint="Ask the camera/stream for 8-bit 4:2:0 (yuv420p), or use the CPU source.",
            )
        self._codec = codec
        self._colour = colour_of(stream.codec_context.colorspace, stream.codec_context.color_range, pix_fmt)
        self._bsf = av.bitstream.BitStreamFilterContext(f"{codec}_mp4toannexb", stream)
        self._size = (int(stream.codec_context.width), int(stream.codec_context.height))
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        self._fps = float(rate) if rate else DEFAULT_FPS
        # LOW: no display delay, each picture comes back at once. A stream with B-frames (some IP
        # cameras) needs NVDEC's reorder delay to come out in display order.
        reordered = bool(stream.codec_context.has_b_frames)
        latency = nvc.DisplayDecodeLatencyType.NATIVE if reordered else nvc.DisplayDecodeLatencyType.LOW
        if reordered:
            log.info("%s has B-frames: NVDEC keeps its reorder delay (a few frames of latency).", self.spec)
        try:
            self._decoder = nvc.CreateDecoder(
                gpuid=self.gpu_id,
                codec=nvc.cudaVideoCodec.H264 if codec == "h264" else nvc.cudaVideoCodec.HEVC,
                cudacontext=0,
                cudastream=0,
                usedevicememory=True,
                outputColorType=nvc.OutputColorType.NATIVE,
                latency=latency,
            )
        except self._errors as err:
            self.close()
            raise SourceError(f"NVDEC cannot decode {self.spec} ({_first_line(err)}).") from err
        self._feed_parameter_sets(stream)
        self._packets = container.demux(stream)
        first = self._next_decoded()
        if first is None:
            self.close()
            raise SourceError(f"{self.spec} ended before NVDEC decoded a frame.")
        self._queue.appendleft(first)
        if self._size == (0, 0):  # some demuxers learn the size only from the first picture
            self._size = (first[0].width, first[0].height)

    def read(self) -> VideoFrame | None:
        if self._decoder is None:
            raise RuntimeError("NvdecStreamSource.read() called before open()")
        item = self._next_decoded()
        return None if item is None else self._frame(item[0], None)

    def close(self) -> None:
        self._packets = iter(())
        self._bsf = None
        container, self._container = self._container, None
        if container is not None:
            container.close()
        self._release()

    def _next_decoded(self) -> tuple[DeviceNV12, float | None] | None:
        while not self._queue:
            try:
                packet = next(self._packets, None)
            except av.error.FFmpegError as err:
                raise SourceError(f"{self.spec}: the stream broke off ({_first_line(err)}).") from err
            if packet is None:
                return self._flush()
            if packet.size == 0:  # PyAV's end-of-stream marker
                continue
            for annexb in self._bsf.filter(packet):
                self._feed(annexb)
        return self._queue.popleft()

    def _feed(self, packet: Any) -> None:
        assert self._nvc is not None
        nvc = self._nvc
        pd = nvc.PacketData()
        # NVDEC reads bsl bytes at bsl_data from host memory during Decode(): `packet` owns that
        # memory and stays referenced until Decode returns.
        pd.bsl_data = packet.buffer_ptr
        pd.bsl = packet.buffer_size
        pd.pts = packet.pts if packet.pts is not None else 0
        pd.decode_flag = nvc.VideoPacketFlag.ENDOFPICTURE
        self._decode(pd, _no_pts)

    def _feed_parameter_sets(self, stream: Any) -> None:
        """Hand NVDEC the SPS/PPS (VPS) that arrived out of band, once, before the first picture.

        RTSP cameras often announce them only in the SDP: FFmpeg puts them in extradata as Annex B,
        the mp4toannexb filter then passes packets through untouched, and NVDEC's parser would never
        see a sequence header (FFmpeg's own NVDEC decoder feeds extradata the same way). avcC/hvcC
        extradata (MP4, FLV) is left to the filter, which inserts it before keyframes.
        """
        assert self._nvc is not None
        header = bytes(stream.codec_context.extradata or b"")
        if not header.startswith(ANNEXB_START_CODES):
            return
        pd = self._nvc.PacketData()
        buffer = np.frombuffer(header, np.uint8)  # referenced until Decode returns
        pd.bsl_data = int(buffer.ctypes.data)
        pd.bsl = int(buffer.size)
        self._decode(pd, _no_pts)

    def _flush(self) -> tuple[DeviceNV12, float | None] | None:
        assert self._nvc is not None
        if self._bsf is not None:
            for annexb in self._bsf.filter(None):
                self._feed(annexb)
            self._bsf = None
            self._decode(self._nvc.PacketData(), _no_pts)
        return self._queue.popleft() if self._queue else None


def _no_pts(frame: Any) -> None:
    return None


# -------------------------------------------------------------------------------------------- router


def _probe_video(path: Path) -> tuple[str, str, int] | None:
    """(codec, pixel format, display rotation in degrees) of a file's first video stream, or None
    when PyAV cannot tell."""
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None
            stream = container.streams.video[0]
            ctx = stream.codec_context
            first = next(container.decode(stream), None)  # the rotation tag comes with the frames
            rotation = round(first.rotation or 0) if first is not None else 0
            return ctx.name, str(ctx.format.name if ctx.format else ""), rotation
    except (av.error.FFmpegError, OSError, ValueError):
        return None


def _probe_colour(path: Path) -> YuvColour:
    """The file's YUV matrix and range from its tags (BT.601 limited when PyAV cannot tell)."""
    try:
        with av.open(str(path)) as container:
            if container.streams.video:
                ctx = container.streams.video[0].codec_context
                return colour_of(ctx.colorspace, ctx.color_range, ctx.pix_fmt)
    except (av.error.FFmpegError, OSError, ValueError) as err:
        log.info("Could not read the colour tags of %s (%s); assuming BT.601 limited range.", path, err)
    return BT601_LIMITED


def open_gpu_source(
    spec: str,
    *,
    realtime: bool | None,
    loop: bool,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    gpu_id: int = 0,
    driver: CudaDriver | None = None,
) -> tuple[FrameSource, str]:
    """The NVDEC source for `spec` where NVDEC can decode it, else open_source()'s CPU source; and a
    sentence saying which was chosen and why. Same interface either way; the caller calls open().
    """

    def cpu(reason: str) -> tuple[FrameSource, str]:
        source = open_source(spec, realtime=realtime, loop=loop, width=width, height=height, fps=fps)
        return source, f"decoding on the CPU: {reason}"

    ok, why = nvdec_available()
    stream = is_stream_spec(spec)
    if not ok:
        if stream:
            raise SourceError(
                f"{spec} needs NVDEC, which is not available: {why}",
                hint="Use a camera index, a video file or an image instead, or fix the NVIDIA driver.",
            )
        return cpu(f"NVDEC not available ({why})")
    if stream:
        src = NvdecStreamSource(spec, gpu_id, width=width, height=height, fps=fps, driver=driver)
        return src, f"decoding with NVDEC on GPU {gpu_id} ({why})"
    if spec.isascii() and spec.isdigit():
        return cpu(
            "camera indices are read through OpenCV (on Linux, give /dev/videoN for a "
            "camera's H.264 stream through NVDEC)"
        )
    path = Path(spec)
    if path.suffix.lower() in IMAGE_EXTENSIONS or not path.is_file():
        return cpu("still images are not video" if path.is_file() else "not a video file")
    probe = _probe_video(path)
    if probe is None:
        return cpu("PyAV could not identify the video codec")
    codec, pix_fmt, rotation = probe
    if codec not in NVDEC_CODECS or pix_fmt not in NVDEC_PIXEL_FORMATS:
        return cpu(f"{codec} {pix_fmt or '?'} is not 8-bit 4:2:0 H.264/HEVC")
    if rotation % 360:
        return cpu(
            f"the video is tagged as turned {rotation % 360} degrees (a phone's portrait video), "
            "which the CPU decoder turns upright"
        )
    source = NvdecFileSource(path, gpu_id, realtime=bool(realtime), loop=loop, driver=driver)
    return source, f"decoding {codec} with NVDEC on GPU {gpu_id} ({why})"


def open_input(
    spec: str,
    *,
    realtime: bool | None,
    loop: bool,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    decoder: Decoder = "auto",
    gpu_id: int = 0,
) -> tuple[FrameSource, str]:
    """The source for an input with the decoder asked for; and a sentence on the decoding ('' when
    there is nothing to say: CPU decoding on a machine without NVDEC is the normal case).

    auto: NVDEC where it can decode the input, and the CPU source if NVDEC then fails to open it
    (a driver or decoder problem must not cost the run); cpu: never NVDEC; nvdec: NVDEC or an error.
    """

    def cpu() -> FrameSource:
        return open_source(spec, realtime=realtime, loop=loop, width=width, height=height, fps=fps)

    if decoder == "cpu":
        return cpu(), ""
    if decoder == "auto" and camera_index(spec) is not None:
        # A camera by number or /dev/videoN: OpenCV, with its reconnect and warm-up (most webcams
        # send MJPG or raw video anyway). `v4l2:/dev/videoN` or --decoder nvdec ask for its H.264.
        return cpu(), ""
    ok, why = nvdec_available()
    if not ok:
        if decoder == "nvdec":
            raise SourceError(
                f"--decoder nvdec: NVDEC is not available ({why}).", hint="Use --decoder auto or cpu."
            )
        return cpu(), ""
    stream = is_stream_spec(spec) and camera_index(spec) is None  # a URL: the CPU sources cannot read it
    source, reason = open_gpu_source(
        spec, realtime=realtime, loop=loop, width=width, height=height, fps=fps, gpu_id=gpu_id
    )
    if decoder == "nvdec" and not isinstance(source, _NvdecBase):
        raise SourceError(f"--decoder nvdec: {reason}.", hint="Use --decoder auto or cpu.")
    if isinstance(source, _NvdecBase) and decoder == "auto" and not stream:
        source = FallbackSource(source, cpu)
    return source, reason
