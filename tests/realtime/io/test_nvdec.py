"""NVDEC sources and the NVENC sink without a GPU.

A fake `PyNvVideoCodec` module is injected through sys.modules. It has the call signatures that
docs/gpu-api-facts.md §1 lists (CreateDemuxer, CreateDecoder with overload 1's keywords, Decode(packet),
PacketData's four writable fields, DecodedFrame.cuda()/__dlpack__(stream), CreateEncoder,
Encode/EndEncode), and really decodes/encodes H.264 with PyAV on the CPU, so the pixels that come out
of a source prove the whole path: Annex B conversion, pointers and sizes handed to NVDEC, NV12 pitch
handling, the copy out of the decoder's surface before the next Decode(), and the lazy download.

What a fake cannot prove (real NVDEC/NVENC behaviour, stream/event semantics, memory layout of the
2.2.4 wheel) is listed in docs/GPU.md under "Not verified on a GPU".
"""

from __future__ import annotations

import collections
import ctypes
import enum
import importlib
import itertools
import sys
import types
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import av.bitstream
import numpy as np
import numpy.typing as npt
import pytest

from realtime.core.errors import SinkError, SourceError
from realtime.io import nvdec, nvenc
from realtime.io.camera_source import CameraSource
from realtime.io.file_sinks import VideoFileSink
from realtime.io.nvdec import NvdecFileSource, NvdecStreamSource, open_gpu_source, stream_open_args
from realtime.io.nvdec_device import DeviceVideoFrame
from realtime.io.outputs import OutputRequest, route_output
from realtime.io.sources import ImageSource
from realtime.io.video_file import VideoFileSource
from tests.fixtures_media import read_frame_number, synthetic_frame

FRAMES = 12
SIZE = (96, 64)
FPS = 25.0
PITCH_PAD = 32  # the fake decoder pads its rows, like a real NVDEC surface may
STREAM_HANDLE = 0x5EED


# ------------------------------------------------------------------------------------ fake module


class OutputColorType(enum.IntEnum):
    NATIVE = 0
    RGB = 1
    RGBP = 2


class DisplayDecodeLatencyType(enum.IntEnum):
    NATIVE = 0
    LOW = 1
    ZERO = 2


class VideoPacketFlag(enum.IntEnum):
    ENDOFSTREAM = 1
    TIMESTAMP = 2
    DISCONTINUITY = 4
    ENDOFPICTURE = 8
    NOTIFY_EOS = 16


class cudaVideoCodec(enum.IntEnum):
    H264 = 4
    HEVC = 8
    VP9 = 10
    AV1 = 11


class PacketData:
    """Four writable fields, nothing else (a misspelt field raises, as on a pybind class)."""

    __slots__ = ("bsl", "bsl_data", "decode_flag", "pts")

    def __init__(self) -> None:
        self.bsl_data = 0
        self.bsl = 0
        self.pts = 0
        self.decode_flag = 0


class _DemuxedPacket(PacketData):
    __slots__ = ("_keep",)  # the demuxer's own memory behind bsl_data


class _Plane:
    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "strides": strides,
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
        }


class FakeDecodedFrame:
    """NV12 in a pitched 'surface' owned by the decoder; invalid once Decode() is called again."""

    def __init__(
        self, log: list[tuple[Any, ...]], surface: npt.NDArray[np.uint8], width: int, height: int, ts: int
    ):
        self._log = log
        self._surface = surface
        self.width, self.height, self.timestamp = width, height, ts
        self.expired = False

    def _alive(self) -> None:
        if self.expired:
            raise RuntimeError("frame used after the decoder reused its surface (next Decode() call)")

    def __dlpack__(self, stream: int = 0) -> object:
        self._alive()
        if stream == 0:
            raise RuntimeError("Invalid value for stream parameter. Passed value of 0 which is not allowed")
        self._log.append(("dlpack", stream))
        return object()

    def cuda(self) -> list[_Plane]:
        self._alive()
        ptr, pitch, h, w = self._surface.ctypes.data, self._surface.shape[1], self.height, self.width
        return [
            _Plane(ptr, (h, w, 1), (pitch, 1, 1)),
            _Plane(ptr + pitch * h, (h // 2, w // 2, 2), (pitch, 2, 1)),
        ]


class FakeDecoder:
    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self._log = log
        self._ctx = av.CodecContext.create("h264", "r")
        self._handed_out: list[FakeDecodedFrame] = []
        self._pts: collections.deque[int] = collections.deque()

    def Decode(self, packet: PacketData) -> list[FakeDecodedFrame]:
        # The previous call's surfaces are reused now: scribble over them and expire their frames.
        for frame in self._handed_out:
            frame._surface[:] = 0x55
            frame.expired = True
        self._handed_out = []
        data = ctypes.string_at(packet.bsl_data, packet.bsl) if packet.bsl else b""
        self._log.append(("Decode", len(data), packet.pts, int(packet.decode_flag)))
        if data and not data.startswith((b"\x00\x00\x00\x01", b"\x00\x00\x01")):
            raise RuntimeError("NVDEC needs Annex B: the packet does not start with a start code")
        decoded = []
        if data:
            # Like NVDEC, a frame carries the pts of the packet it came from (in display order).
            self._pts.append(int(packet.pts))
            for parsed in self._ctx.parse(data):
                parsed.pts = self._pts.popleft() if self._pts else None
                decoded += self._ctx.decode(parsed)
        else:
            for parsed in self._ctx.parse(b""):
                decoded += self._ctx.decode(parsed)
            decoded += self._ctx.decode(None)
        for f in decoded:
            nv12 = f.reformat(format="nv12").to_ndarray()
            h, w = f.height, f.width
            surface = np.full((h * 3 // 2, w + PITCH_PAD), 0x77, np.uint8)
            surface[:, :w] = nv12
            self._handed_out.append(FakeDecodedFrame(self._log, surface, w, h, int(f.pts or 0)))
        return list(self._handed_out)


class FakeDemuxer:
    def __init__(self, path: str, bit_depth: int = 8) -> None:
        self._container = av.open(path)
        self._stream = self._container.streams.video[0]
        self._bit_depth = bit_depth

    def __iter__(self) -> Iterator[PacketData]:
        # The real demuxer converts to Annex B itself (docs/gpu-api-facts.md §1).
        bsf = av.bitstream.BitStreamFilterContext("h264_mp4toannexb", self._stream)
        for packet in self._container.demux(self._stream):
            for annexb in bsf.filter(packet if packet.size else None):
                pd = _DemuxedPacket()
                pd._keep = ctypes.create_string_buffer(bytes(annexb), annexb.size)
                pd.bsl_data, pd.bsl = ctypes.addressof(pd._keep), annexb.size
                pd.pts = annexb.pts or 0
                yield pd

    def GetNvCodecId(self) -> cudaVideoCodec:
        return cudaVideoCodec.H264

    def Width(self) -> int:
        return int(self._stream.width)

    def Height(self) -> int:
        return int(self._stream.height)

    def FrameRate(self) -> float:
        return float(self._stream.average_rate or 0)

    def BitDepth(self) -> int:
        return self._bit_depth

    def GetTimebaseNum(self) -> int:
        return int(self._stream.time_base.numerator)

    def GetTimebaseDen(self) -> int:
        return int(self._stream.time_base.denominator)


class FakeEncoder:
    """Encodes host NV12 with libx264 into Annex B access units, returned like 2.2.4's Encode()."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.ctx = av.CodecContext.create("libx264", "w")
        self.ctx.width, self.ctx.height, self.ctx.pix_fmt = width, height, "yuv420p"
        self.ctx.time_base = Fraction(1, 25)
        self.ctx.options = {"bf": "0"}
        self.inputs: list[npt.NDArray[np.uint8]] = []

    def _out(self, packets: list[av.Packet]) -> list[dict[str, Any]]:
        return [{"data": bytes(p), "timestamp": 0, "picture_type": 0} for p in packets]

    def Encode(self, frame: npt.NDArray[np.uint8]) -> list[dict[str, Any]]:
        if not isinstance(frame, np.ndarray) or frame.size != self.width * self.height * 3 // 2:
            raise ValueError("host NV12 of w*h*1.5 bytes expected")
        self.inputs.append(frame.copy())
        nv12 = frame.reshape(self.height * 3 // 2, self.width)
        av_frame = av.VideoFrame.from_ndarray(nv12, format="nv12").reformat(format="yuv420p")
        av_frame.pts = len(self.inputs)
        return self._out(self.ctx.encode(av_frame))

    def EndEncode(self) -> list[dict[str, Any]]:
        return self._out(self.ctx.encode(None))


class PyNvVCException(Exception):
    """Like PyNvVideoCodec 2.2.4's: derives from Exception, not RuntimeError."""


class FakeNvc:
    """Builds the fake module and records every call that matters."""

    def __init__(self, bit_depth: int = 8) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.decoder_kwargs: list[dict[str, Any]] = []
        self.encoder_calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.encoders: list[FakeEncoder] = []
        self.bit_depth = bit_depth
        m = types.ModuleType("PyNvVideoCodec")
        m.__version__ = "2.2.4-fake"  # type: ignore[attr-defined]
        for enum_type in (OutputColorType, DisplayDecodeLatencyType, VideoPacketFlag, cudaVideoCodec):
            setattr(m, enum_type.__name__, enum_type)
        m.PacketData = PacketData  # type: ignore[attr-defined]
        m.PyNvVCException = PyNvVCException  # type: ignore[attr-defined]
        m.CreateDemuxer = self.CreateDemuxer  # type: ignore[attr-defined]
        m.CreateDecoder = self.CreateDecoder  # type: ignore[attr-defined]
        m.CreateEncoder = self.CreateEncoder  # type: ignore[attr-defined]
        self.module = m

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        assert isinstance(filename, str)
        self.log.append(("CreateDemuxer", filename))
        return FakeDemuxer(filename, self.bit_depth)

    # Overload 1's keywords exactly (docs/gpu-api-facts.md §1): a misspelt keyword is a TypeError.
    def CreateDecoder(
        self,
        gpuid: int = 0,
        codec: int = cudaVideoCodec.H264,
        cudacontext: int = 0,
        cudastream: int = 0,
        usedevicememory: bool = False,
        maxwidth: int = 0,
        maxheight: int = 0,
        outputColorType: int = OutputColorType.NATIVE,
        enableSEIMessage: bool = False,
        bWaitForSessionWarmUp: bool = False,
        latency: int = DisplayDecodeLatencyType.NATIVE,
        enableDecodeStats: bool = False,
    ) -> FakeDecoder:
        self.decoder_kwargs.append(
            {
                "gpuid": gpuid,
                "codec": codec,
                "usedevicememory": usedevicememory,
                "latency": latency,
                "outputColorType": outputColorType,
                "cudacontext": cudacontext,
                "cudastream": cudastream,
            }
        )
        self.log.append(("CreateDecoder",))
        return FakeDecoder(self.log)

    def CreateEncoder(
        self, width: int, height: int, fmt: str, usecpuinputbuffer: bool, **kwargs: Any
    ) -> FakeEncoder:
        self.encoder_calls.append(((width, height, fmt, usecpuinputbuffer), kwargs))
        encoder = FakeEncoder(width, height)
        self.encoders.append(encoder)
        return encoder


class HostDriver:
    """realtime.io.nvdec.CudaDriver on host memory: 'device pointers' are numpy buffer addresses."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log
        self.buffers: dict[int, npt.NDArray[np.uint8]] = {}
        self.allocs = 0
        self.syncs = 0

    def stream_create(self) -> int:
        return STREAM_HANDLE

    def stream_synchronize(self, stream: int) -> None:
        assert stream == STREAM_HANDLE
        self.syncs += 1
        self.log.append(("sync", stream))

    def stream_destroy(self, stream: int) -> None:
        assert stream == STREAM_HANDLE

    def alloc(self, nbytes: int) -> int:
        buf = np.empty(nbytes, np.uint8)
        self.buffers[buf.ctypes.data] = buf
        self.allocs += 1
        return int(buf.ctypes.data)

    def free(self, ptr: int) -> None:
        del self.buffers[ptr]

    def copy_dtod_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        assert stream == STREAM_HANDLE
        ctypes.memmove(dst, src, nbytes)
        self.log.append(("copy", nbytes))

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst_host, src, nbytes)

    def copy_htod(self, dst: int, src_host: int, nbytes: int) -> None:
        ctypes.memmove(dst, src_host, nbytes)

    def mem_get_info(self) -> tuple[int, int]:
        return (1 << 30, 2 << 30)


@pytest.fixture
def fake_nvc(monkeypatch: pytest.MonkeyPatch) -> FakeNvc:
    fake = FakeNvc()
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", fake.module)
    return fake


@pytest.fixture
def h264_clip(tmp_path: Path) -> Path:
    return write_h264(tmp_path / "clip.mp4", FRAMES)


def write_h264(path: Path, frames: int, first_pts: int = 0, b_frames: bool = True) -> Path:
    """An H.264 clip with B-frames (libx264 defaults): decode order differs from display order.
    `first_pts` (in frames) starts the file's timeline later, as broadcast .ts files do."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(int(FPS)))
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        stream.options = {"crf": "12"} if b_frames else {"crf": "12", "bf": "0"}
        for n in range(frames):
            frame = av.VideoFrame.from_ndarray(synthetic_frame(n, SIZE), format="bgr24")
            frame.pts = first_pts + n
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def read_all(source: Any, limit: int = 1000) -> list[Any]:
    frames = []
    while len(frames) < limit and (frame := source.read()) is not None:
        frames.append(frame)
    return frames


def assert_cloned_before_next_decode(log: list[tuple[Any, ...]]) -> None:
    """Every 'dlpack' (the wait on the decode event) is followed by the copy and a sync before the
    next Decode: checked on the event order (the fake also expires frames at the next Decode)."""
    for i, entry in enumerate(log):
        if entry[0] != "dlpack":
            continue
        after = [e[0] for e in log[i + 1 :]]
        next_decode = after.index("Decode") if "Decode" in after else len(after)
        assert "copy" in after[:next_decode] and "sync" in after[:next_decode], log[i : i + 5]


# ---------------------------------------------------------------------------------- availability


def test_availability_reports_the_real_import_error_here() -> None:
    ok, reason = nvdec.nvdec_available()
    try:
        importlib.import_module("PyNvVideoCodec")
    except (RuntimeError, ImportError) as err:
        assert not ok
        assert reason == str(err).strip().splitlines()[0]  # one line, not the troubleshooting text
        assert "\n" not in reason and reason
    else:  # a machine with the NVIDIA driver
        assert ok and "PyNvVideoCodec" in reason


@pytest.mark.parametrize("error", [RuntimeError("Driver version is too old"), ImportError("no module")])
def test_availability_catches_runtime_and_import_errors(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    real = importlib.import_module

    def fail(name: str, *args: Any) -> Any:
        if name == "PyNvVideoCodec":
            raise error
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", fail)
    assert nvdec.nvdec_available() == (False, str(error))
    assert nvenc.nvenc_available() == (False, str(error))


def test_open_gpu_source_falls_back_to_the_cpu_source_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, h264_clip: Path
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # import now raises ImportError
    ok, why = nvdec.nvdec_available()
    assert not ok
    source, reason = open_gpu_source(str(h264_clip), realtime=False, loop=False)
    assert isinstance(source, VideoFileSource)
    assert reason.startswith("decoding on the CPU") and why in reason
    source.open()
    try:
        assert len(read_all(source)) == FRAMES  # same interface, same frames
    finally:
        source.close()


def test_open_gpu_source_here_without_a_driver(h264_clip: Path) -> None:
    ok, why = nvdec.nvdec_available()
    if ok:
        pytest.skip("this machine has an NVIDIA driver")
    source, reason = open_gpu_source(str(h264_clip), realtime=False, loop=False)
    assert isinstance(source, VideoFileSource) and why in reason


def test_a_stream_without_nvdec_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    with pytest.raises(SourceError, match="needs NVDEC"):
        open_gpu_source("rtsp://camera.local/stream", realtime=True, loop=False)


def test_open_gpu_source_routes_each_input(fake_nvc: FakeNvc, tmp_path: Path, h264_clip: Path) -> None:
    source, reason = open_gpu_source(str(h264_clip), realtime=False, loop=False)
    assert isinstance(source, NvdecFileSource) and "NVDEC" in reason
    mpeg4 = tmp_path / "mpeg4.mp4"
    with av.open(str(mpeg4), "w") as c:
        s = c.add_stream("mpeg4", rate=25)
        s.width, s.height, s.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        c.mux(s.encode(av.VideoFrame.from_ndarray(synthetic_frame(0, SIZE), format="bgr24")))
        c.mux(s.encode(None))
    source, reason = open_gpu_source(str(mpeg4), realtime=False, loop=False)
    assert isinstance(source, VideoFileSource) and "mpeg4" in reason
    source, reason = open_gpu_source("0", realtime=True, loop=False)
    assert isinstance(source, CameraSource) and "OpenCV" in reason
    image = tmp_path / "face.png"
    import cv2

    cv2.imwrite(str(image), synthetic_frame(0, SIZE))
    source, reason = open_gpu_source(str(image), realtime=False, loop=False)
    assert isinstance(source, ImageSource)
    source, reason = open_gpu_source("rtsp://cam/stream", realtime=True, loop=False)
    assert isinstance(source, NvdecStreamSource)


# ------------------------------------------------------------------------------------ file source


def test_file_source_decodes_into_device_frames_in_order(fake_nvc: FakeNvc, h264_clip: Path) -> None:
    driver = HostDriver(fake_nvc.log)
    source = NvdecFileSource(h264_clip, driver=driver)
    source.open()
    try:
        assert source.size == SIZE and source.fps == FPS and not source.is_live
        frames = read_all(source)
    finally:
        source.close()
    assert len(frames) == FRAMES
    # The decoder was asked for device memory, NV12 and display order, on its own stream/context.
    (kwargs,) = fake_nvc.decoder_kwargs
    assert kwargs["usedevicememory"] is True
    assert kwargs["outputColorType"] == OutputColorType.NATIVE
    assert kwargs["latency"] == DisplayDecodeLatencyType.NATIVE
    assert kwargs["codec"] == cudaVideoCodec.H264 and kwargs["gpuid"] == 0
    # Every frame waited on its decode event with a real stream, and was copied out in time.
    dlpack_streams = {e[1] for e in fake_nvc.log if e[0] == "dlpack"}
    assert dlpack_streams == {STREAM_HANDLE}
    assert_cloned_before_next_decode(fake_nvc.log)
    assert any(e[0] == "Decode" and e[1] == 0 for e in fake_nvc.log), "no end-of-stream flush"
    # Frames are device frames; the host image is made lazily, once, and carries the right picture.
    assert all(isinstance(f, DeviceVideoFrame) for f in frames)
    assert all(not f.image_loaded for f in frames)
    assert [f.width for f in frames] == [SIZE[0]] * FRAMES  # size without a download
    numbers = [read_frame_number(f.image) for f in frames]
    assert numbers == list(range(FRAMES))
    assert all(f.image_loaded for f in frames)
    expected = synthetic_frame(5, SIZE).astype(int)
    assert np.abs(frames[5].image.astype(int) - expected).mean() < 6  # BT.601 round trip + x264
    # pts follow the stream timeline; indices count from 0.
    assert [f.index for f in frames] == list(range(FRAMES))
    assert frames[3].pts == pytest.approx(3 / FPS, abs=1e-6)


def test_device_frame_is_downloaded_once_and_only_when_asked(fake_nvc: FakeNvc, h264_clip: Path) -> None:
    source = NvdecFileSource(h264_clip, driver=HostDriver(fake_nvc.log))
    source.open()
    try:
        first, second = source.read(), source.read()
        assert isinstance(first, DeviceVideoFrame) and isinstance(second, DeviceVideoFrame)
        copier = source.copier
        assert copier is not None and copier.downloads == 0
        assert "NV12 on GPU" in repr(first) and copier.downloads == 0  # repr does not download
        image = first.image
        assert first.image is image and copier.downloads == 1
        assert first.device.__cuda_array_interface__["shape"] == (SIZE[1] * 3 // 2, SIZE[0])
        assert first.device.pitch == SIZE[0] + PITCH_PAD
        assert copier.downloads == 1 and not second.image_loaded
    finally:
        source.close()


def test_file_source_loops_with_increasing_pts(fake_nvc: FakeNvc, h264_clip: Path) -> None:
    source = NvdecFileSource(h264_clip, loop=True, driver=HostDriver(fake_nvc.log))
    source.open()
    try:
        frames = read_all(source, limit=2 * FRAMES + 3)
    finally:
        source.close()
    assert len(frames) == 2 * FRAMES + 3
    pts = [f.pts for f in frames]
    assert all(b > a for a, b in itertools.pairwise(pts))
    assert [read_frame_number(f.image) for f in frames[FRAMES - 1 : FRAMES + 2]] == [FRAMES - 1, 0, 1]
    assert sum(1 for e in fake_nvc.log if e[0] == "CreateDemuxer") == 3


def test_looping_a_file_that_starts_late_does_not_stall_at_the_loop(
    fake_nvc: FakeNvc, tmp_path: Path
) -> None:
    ts_clip = write_h264(tmp_path / "clip.ts", FRAMES, first_pts=35)  # starts at 1.4 s
    source = NvdecFileSource(ts_clip, loop=True, driver=HostDriver(fake_nvc.log))
    source.open()
    try:
        frames = read_all(source, limit=2 * FRAMES + 1)
    finally:
        source.close()
    pts = [f.pts for f in frames]
    assert pts[0] > 1.0  # the file's own timeline is kept
    steps = [b - a for a, b in itertools.pairwise(pts)]
    assert steps == pytest.approx([1 / FPS] * len(steps), abs=2e-3)  # no gap at the loop


def test_ten_bit_video_is_refused_with_a_reason(monkeypatch: pytest.MonkeyPatch, h264_clip: Path) -> None:
    fake = FakeNvc(bit_depth=10)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", fake.module)
    with pytest.raises(SourceError, match="10-bit"):
        NvdecFileSource(h264_clip, driver=HostDriver(fake.log)).open()


def test_a_decoder_error_is_a_source_error(
    fake_nvc: FakeNvc, h264_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(self: FakeDecoder, packet: PacketData) -> list[FakeDecodedFrame]:
        raise RuntimeError("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure")

    monkeypatch.setattr(FakeDecoder, "Decode", failing)
    with pytest.raises(SourceError, match=r"NVDEC decoding failed \(CUDA_ERROR_LAUNCH_FAILED"):
        NvdecFileSource(h264_clip, driver=HostDriver(fake_nvc.log)).open()


def test_pynvvideocodec_own_exceptions_are_source_errors_too(
    fake_nvc: FakeNvc, h264_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(self: FakeDecoder, packet: PacketData) -> list[FakeDecodedFrame]:
        raise PyNvVCException("cuvidDecodePicture failed: CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(FakeDecoder, "Decode", failing)
    with pytest.raises(SourceError, match="NVDEC decoding failed"):
        NvdecFileSource(h264_clip, driver=HostDriver(fake_nvc.log)).open()


def test_a_stream_whose_decoder_cannot_be_made_is_a_source_error(
    fake_nvc: FakeNvc, h264_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tracked:
        def __init__(self, container: Any) -> None:
            self.container, self.closed = container, False

        def __getattr__(self, name: str) -> Any:
            return getattr(self.container, name)

        def close(self) -> None:
            self.closed = True
            self.container.close()

    containers: list[Tracked] = []

    def opener(file: str, **kwargs: Any) -> Any:
        containers.append(Tracked(av.open(str(h264_clip))))
        return containers[-1]

    def no_decoder(**kwargs: Any) -> FakeDecoder:
        raise PyNvVCException("Codec not supported on this GPU")

    monkeypatch.setattr(fake_nvc.module, "CreateDecoder", no_decoder)
    source = NvdecStreamSource("rtsp://cam/live", driver=HostDriver(fake_nvc.log), opener=opener)
    with pytest.raises(SourceError, match=r"NVDEC cannot decode rtsp://cam/live \(Codec not supported"):
        source.open()
    assert containers[0].closed  # not leaked


def test_without_a_cuda_driver_the_source_says_so(fake_nvc: FakeNvc, h264_clip: Path) -> None:
    # No injected driver: the ctypes CUDA driver is tried, and this machine has no libcuda.
    try:
        nvdec.CtypesCudaDriver(0)
    except RuntimeError:
        pass
    else:
        pytest.skip("this machine has a CUDA driver")
    with pytest.raises(SourceError, match="CUDA is not usable"):
        NvdecFileSource(h264_clip).open()


# ---------------------------------------------------------------------------------- stream source


@pytest.mark.parametrize("b_frames", [False, True])
def test_stream_source_feeds_annexb_pictures_with_low_latency(
    fake_nvc: FakeNvc, tmp_path: Path, b_frames: bool
) -> None:
    h264_clip = write_h264(tmp_path / "live.mp4", FRAMES, b_frames=b_frames)
    opened: list[tuple[str, dict[str, Any]]] = []

    def opener(file: str, **kwargs: Any) -> Any:
        opened.append((file, kwargs))
        return av.open(str(h264_clip))  # an MP4: AVCC packets, which must be converted to Annex B

    source = NvdecStreamSource("rtsp://camera.local/live", driver=HostDriver(fake_nvc.log), opener=opener)
    source.open()
    try:
        assert source.is_live and source.size == SIZE
        frames = read_all(source)
    finally:
        source.close()
    ((file, kwargs),) = opened
    assert file == "rtsp://camera.local/live"
    assert kwargs["options"]["rtsp_transport"] == "tcp" and kwargs["options"]["fflags"] == "nobuffer"
    (decoder,) = fake_nvc.decoder_kwargs
    assert decoder["usedevicememory"] is True
    # No display delay, unless the stream has B-frames: then NVDEC must reorder them.
    expected = DisplayDecodeLatencyType.NATIVE if b_frames else DisplayDecodeLatencyType.LOW
    assert decoder["latency"] == expected
    picture_decodes = [e for e in fake_nvc.log if e[0] == "Decode" and e[1] > 0]
    assert picture_decodes and all(e[3] == VideoPacketFlag.ENDOFPICTURE for e in picture_decodes)
    assert_cloned_before_next_decode(fake_nvc.log)
    assert [read_frame_number(f.image) for f in frames] == list(range(FRAMES))
    assert all(f.pts is None for f in frames)  # live: no media timeline


def test_stream_source_rejects_other_codecs(fake_nvc: FakeNvc, tmp_path: Path) -> None:
    mjpeg = tmp_path / "cam.mkv"
    with av.open(str(mjpeg), "w") as c:
        s = c.add_stream("mjpeg", rate=25)
        s.width, s.height, s.pix_fmt = SIZE[0], SIZE[1], "yuvj420p"
        c.mux(s.encode(av.VideoFrame.from_ndarray(synthetic_frame(0, SIZE), format="bgr24")))
        c.mux(s.encode(None))
    source = NvdecStreamSource(
        "/dev/video0", driver=HostDriver(fake_nvc.log), opener=lambda f, **k: av.open(str(mjpeg))
    )
    with pytest.raises(SourceError, match="mjpeg"):
        source.open()


def split_nals(data: bytes) -> list[bytes]:
    """Annex B -> NAL units (without start codes)."""
    parts = data.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01").split(b"\x00\x00\x01")
    return [p for p in parts if p]


class SdpOnlyCamera:
    """An RTSP camera that announces SPS/PPS only in the SDP: FFmpeg has them as Annex B
    extradata, and no packet carries them (a raw .h264 file with its parameter sets cut out)."""

    def __init__(self, path: Path) -> None:
        self.container = av.open(str(path), format="h264")
        self.streams = self.container.streams

    def demux(self, stream: Any) -> Iterator[av.Packet]:
        for packet in self.container.demux(stream):
            kept = [n for n in split_nals(bytes(packet)) if n[0] & 0x1F not in (7, 8)]
            if kept:
                yield av.Packet(b"".join(b"\x00\x00\x00\x01" + n for n in kept))

    def close(self) -> None:
        self.container.close()


def test_stream_source_feeds_out_of_band_parameter_sets_first(fake_nvc: FakeNvc, tmp_path: Path) -> None:
    raw = tmp_path / "cam.h264"
    with av.open(str(raw), "w", format="h264") as container:
        stream = container.add_stream("libx264", rate=Fraction(int(FPS)))
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        for n in range(FRAMES):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(synthetic_frame(n, SIZE), format="bgr24")))
        container.mux(stream.encode(None))
    camera = SdpOnlyCamera(raw)
    header = bytes(camera.streams.video[0].codec_context.extradata)
    assert header.startswith(b"\x00\x00") and {n[0] & 0x1F for n in split_nals(header)} == {7, 8}
    source = NvdecStreamSource(
        "rtsp://cam/sdp", driver=HostDriver(fake_nvc.log), opener=lambda f, **k: camera
    )
    source.open()
    try:
        frames = read_all(source)
    finally:
        source.close()
    first_decode = next(e for e in fake_nvc.log if e[0] == "Decode")
    assert first_decode[1] == len(header) and first_decode[3] == 0  # the SPS/PPS alone, first
    assert [read_frame_number(f.image) for f in frames] == list(range(FRAMES))


@pytest.mark.parametrize("pix_fmt", ["yuv420p10le", "yuv444p"])
def test_stream_source_refuses_what_nvdec_would_not_give_as_nv12(
    fake_nvc: FakeNvc, tmp_path: Path, pix_fmt: str
) -> None:
    clip = tmp_path / f"{pix_fmt}.mkv"
    with av.open(str(clip), "w") as c:
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = SIZE[0], SIZE[1], pix_fmt
        c.mux(s.encode(av.VideoFrame.from_ndarray(synthetic_frame(0, SIZE), format="bgr24")))
        c.mux(s.encode(None))
    source = NvdecStreamSource(
        "rtsp://cam/x", driver=HostDriver(fake_nvc.log), opener=lambda f, **k: av.open(str(clip))
    )
    with pytest.raises(SourceError, match=f"as {pix_fmt}; NVDEC is used here for 8-bit 4:2:0 only"):
        source.open()


def test_a_decoded_picture_that_is_not_nv12_is_a_source_error(
    fake_nvc: FakeNvc, h264_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def three_planes(self: FakeDecodedFrame) -> list[_Plane]:  # what a 4:4:4 surface looks like
        ptr, pitch, h, w = self._surface.ctypes.data, self._surface.shape[1], self.height, self.width
        return [_Plane(ptr + i * pitch * h, (h, w, 1), (pitch, 1, 1)) for i in range(3)]

    monkeypatch.setattr(FakeDecodedFrame, "cuda", three_planes)
    with pytest.raises(SourceError, match="not 8-bit 4:2:0 NV12"):
        NvdecFileSource(h264_clip, driver=HostDriver(fake_nvc.log)).open()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "rtsp://h/s",
            ("rtsp://h/s", None, {"fflags": "nobuffer", "flags": "low_delay", "rtsp_transport": "tcp"}),
        ),
        ("srt://h:9000", ("srt://h:9000", None, {"fflags": "nobuffer", "flags": "low_delay"})),
        (
            "/dev/video2",
            ("/dev/video2", "v4l2", {"input_format": "h264", "video_size": "1280x720", "framerate": "30"}),
        ),
    ],
)
def test_stream_open_args(spec: str, expected: tuple[str, str | None, dict[str, str]]) -> None:
    assert stream_open_args(spec, 1280, 720, 30) == expected  # size/rate are camera requests only


def test_stream_open_args_rejects_other_inputs() -> None:
    with pytest.raises(SourceError, match="Not a stream"):
        stream_open_args("movie.mp4")


def test_a_directshow_camera_is_refused_with_what_to_use_instead() -> None:
    # PyAV cannot set dshow's codec (ffmpeg's -vcodec flag), so it would always get raw video.
    with pytest.raises(SourceError, match="DirectShow") as info:
        stream_open_args("dshow:video=Cam", 1280, 720, 30)
    assert "index" in info.value.user_message()


# ------------------------------------------------------------------------------------------- NVENC


def _frames(n: int) -> Iterator[Any]:
    from realtime.core.frames import VideoFrame

    for i in range(n):
        yield VideoFrame(synthetic_frame(i, SIZE), i, 0.0, i / FPS)


def test_nvenc_sink_encodes_and_muxes_a_playable_file(fake_nvc: FakeNvc, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    sink = nvenc.NvencFileSink(out)
    sink.open(*SIZE, FPS)
    for frame in _frames(FRAMES):
        sink.send(frame)
    sink.close()
    ((args, kwargs),) = fake_nvc.encoder_calls
    assert args == (SIZE[0], SIZE[1], "NV12", True)
    assert kwargs["codec"] == "h264" and kwargs["preset"] == "P4" and kwargs["tuning_info"] == "low_latency"
    assert kwargs["bf"] == 0
    assert kwargs["gop"] == kwargs["idrperiod"] == round(2 * FPS)  # not NVENC's infinite GOP
    assert not sink.fallback_reason and "NVENC" in sink.description
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.width, stream.height) == ("h264", *SIZE)
        decoded = [f.to_ndarray(format="bgr24") for f in container.decode(stream)]
    assert [read_frame_number(img) for img in decoded] == list(range(FRAMES))
    assert not list(tmp_path.glob(".*partial*"))


def test_nvenc_sink_falls_back_to_the_cpu_writer_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    out = tmp_path / "out.mp4"
    sink = nvenc.NvencFileSink(out)
    sink.open(*SIZE, FPS)
    assert sink.fallback_reason and "NVENC not used" in sink.description
    for frame in _frames(5):
        sink.send(frame)
    sink.close()
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 5


def test_nvenc_missing_on_the_gpu_falls_back_to_the_cpu_writer(
    fake_nvc: FakeNvc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_nvenc(*args: Any, **kwargs: Any) -> FakeEncoder:
        raise PyNvVCException("NV_ENC_ERR_NO_ENCODE_DEVICE: This GPU has no NVENC")

    monkeypatch.setattr(fake_nvc.module, "CreateEncoder", no_nvenc)  # e.g. an A100 or H100
    out = tmp_path / "out.mp4"
    sink = nvenc.NvencFileSink(out)
    sink.open(*SIZE, FPS)
    assert "no NVENC" in sink.fallback_reason and "NVENC not used" in sink.description
    for frame in _frames(3):
        sink.send(frame)
    sink.close()
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 3


def test_an_nvenc_failure_mid_file_is_a_sink_error_and_removes_the_partial_file(
    fake_nvc: FakeNvc, tmp_path: Path
) -> None:
    out = tmp_path / "out.mp4"
    sink = nvenc.NvencFileSink(out)
    sink.open(*SIZE, FPS)
    frames = list(_frames(3))
    sink.send(frames[0])

    def broken(frame: Any) -> list[dict[str, Any]]:
        raise PyNvVCException("NV_ENC_ERR_ENCODER_BUSY")

    fake_nvc.encoders[0].Encode = broken  # type: ignore[method-assign]
    with pytest.raises(SinkError, match="NV_ENC_ERR_ENCODER_BUSY"):
        sink.send(frames[1])
    assert not out.exists() and not list(tmp_path.iterdir())


def test_nvenc_keeps_fractional_frame_rates(fake_nvc: FakeNvc, tmp_path: Path) -> None:
    for fps, text in ((29.97, "29.97"), (30.0, "30"), (23.976, "23.976")):
        sink = nvenc.NvencFileSink(tmp_path / f"{text}.mp4")
        sink.open(*SIZE, fps)
        assert fake_nvc.encoder_calls[-1][1]["fps"] == text
        sink.abort()


def test_the_output_router_picks_nvenc_for_mp4_when_it_imports(
    fake_nvc: FakeNvc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, reason = route_output(OutputRequest(str(tmp_path / "a.mp4"), encoder="nvenc"))
    assert isinstance(sink, nvenc.NvencFileSink) and "NVENC" in reason
    sink, reason = route_output(OutputRequest(str(tmp_path / "a.avi"), encoder="nvenc"))
    assert isinstance(sink, VideoFileSink)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    sink, reason = route_output(OutputRequest(str(tmp_path / "a.mp4"), encoder="nvenc"))
    assert isinstance(sink, VideoFileSink) and "NVENC not available" in reason


def test_keyframe_detection_reads_nal_types() -> None:
    assert nvenc.is_keyframe(b"\x00\x00\x00\x01\x67\x42\x00\x00\x00\x01\x65\x88", "h264")
    assert not nvenc.is_keyframe(b"\x00\x00\x00\x01\x41\x9a", "h264")
    assert nvenc.is_keyframe(b"\x00\x00\x01\x26\x01\xaf", "hevc")  # IDR_W_RADL (19)
    assert not nvenc.is_keyframe(b"\x00\x00\x01\x02\x01\xd0", "hevc")  # TRAIL_R (1)


def test_bgr_to_nv12_round_trips() -> None:
    import cv2

    image = cv2.GaussianBlur(synthetic_frame(3, SIZE), (5, 5), 1)
    back = cv2.cvtColor(nvenc.bgr_to_nv12(image), cv2.COLOR_YUV2BGR_NV12)
    assert np.abs(back.astype(int) - image.astype(int)).mean() < 3


def test_nvdec_frames_keep_a_bt709_file_colours_like_the_cpu_source(
    fake_nvc: FakeNvc, tmp_path: Path
) -> None:
    from models.ops.yuv import YuvColour
    from tests.models.ops.test_yuv import PATCHES, patches_clip

    clip = patches_clip(tmp_path / "hd.mp4", "yuv420p", 1, 1)  # tagged BT.709, limited range
    gpu_source = NvdecFileSource(clip, driver=HostDriver(fake_nvc.log))
    cpu_source = VideoFileSource(clip)
    gpu_source.open()
    cpu_source.open()
    try:
        gpu_frame, cpu_frame = gpu_source.read(), cpu_source.read()
    finally:
        gpu_source.close()
        cpu_source.close()
    assert isinstance(gpu_frame, DeviceVideoFrame) and cpu_frame is not None
    assert gpu_frame.device.colour == YuvColour("bt709", full_range=False)
    for i in range(len(PATCHES)):
        y, x = 16, 16 * i + 8
        assert np.abs(gpu_frame.image[y, x].astype(int) - cpu_frame.image[y, x]).max() <= 2


# ---- open_input: the decoder a run asks for --------------------------------------------------------


def test_open_input_on_the_cpu_or_without_nvdec_is_the_plain_source(
    monkeypatch: pytest.MonkeyPatch, h264_clip: Path
) -> None:
    source, note = nvdec.open_nvdec_input(str(h264_clip), realtime=False, loop=False, decoder="cpu")
    assert isinstance(source, VideoFileSource) and note == ""
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # no NVDEC here
    source, note = nvdec.open_nvdec_input(str(h264_clip), realtime=False, loop=False, decoder="auto")
    assert isinstance(source, VideoFileSource) and note == ""  # the normal case: nothing to say
    camera, _ = nvdec.open_nvdec_input("/dev/video0", realtime=True, loop=False, decoder="auto")
    assert isinstance(camera, CameraSource)  # not "needs NVDEC": OpenCV reads the camera
    with pytest.raises(SourceError, match="NVDEC is not available"):
        nvdec.open_nvdec_input(str(h264_clip), realtime=False, loop=False, decoder="nvdec")


def test_nvdec_failing_to_open_a_file_falls_back_to_the_cpu_decoder(
    fake_nvc: FakeNvc, monkeypatch: pytest.MonkeyPatch, h264_clip: Path
) -> None:
    """A decoder NVDEC cannot create (an old driver, no free decoder) falls back to the CPU decoder,
    which plays every frame, instead of ending the run at start."""
    from realtime.io.sources import FallbackSource

    def no_decoder(*_args: Any, **_kwargs: Any) -> Any:
        raise PyNvVCException("cuvidCreateDecoder failed: CUDA_ERROR_NO_DEVICE")

    monkeypatch.setattr(fake_nvc.module, "CreateDecoder", no_decoder)
    monkeypatch.setattr(fake_nvc.module, "CreateDemuxer", no_decoder)
    source, note = nvdec.open_nvdec_input(str(h264_clip), realtime=False, loop=False, decoder="auto")
    assert isinstance(source, FallbackSource) and "NVDEC" in note
    source.open()
    try:
        assert source.fell_back and "video file" in source.description
        assert [read_frame_number(f.image) for f in read_all(source)] == list(range(FRAMES))
    finally:
        source.close()
    source.open()  # a second open (the engine's, after the CLI's check) stays on the CPU
    source.close()


def test_with_nvdec_a_camera_stays_with_opencv_and_a_rotated_file_goes_to_the_cpu(
    fake_nvc: FakeNvc, tmp_path: Path
) -> None:
    """With NVDEC, /dev/video0 stays with OpenCV (FFmpeg's H.264 camera path would open it up to
    three times before the run, with no reconnect), and a phone's portrait video goes to the CPU
    decoder, which turns it upright."""
    from tests.fixtures_media import make_test_video

    camera, _ = nvdec.open_nvdec_input("/dev/video0", realtime=True, loop=False, decoder="auto")
    assert isinstance(camera, CameraSource)
    phone = make_test_video(tmp_path / "phone.mp4", frames=3, size=SIZE, rotation=-90, codec="libx264")
    source, note = nvdec.open_nvdec_input(str(phone), realtime=False, loop=False, decoder="auto")
    assert isinstance(source, VideoFileSource) and "turned 270 degrees" in note
