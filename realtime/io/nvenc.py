"""NVENC file output: frames encoded to H.264/HEVC by the GPU's encoder, muxed with PyAV.

The engine's output frames are BGR on the host (the compositor runs on the CPU today), so the sink
converts each to NV12 on the host (OpenCV, BT.601 like realtime/io/file_sinks.py) and hands it to NVENC with
`usecpuinputbuffer=True`; the encoder uploads it. NVENC returns Annex B packets that PyAV muxes into
the container without re-encoding (`add_mux_stream`); the MP4 muxer builds the avcC box from the
first keyframe's SPS/PPS.

When NVENC cannot start (no driver, no free encoder session, unsupported size), the sink says why
(`fallback_reason`, a log warning) and writes the same file with realtime.io.file_sinks.VideoFileSink.

This module is not verified on a GPU: see docs/GPU.md, "Not verified on a GPU".
"""

from __future__ import annotations

import collections
import importlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import av
import av.error
import cv2
import numpy as np
import numpy.typing as npt

from models.types import ImageBGR
from realtime.core.errors import SinkError
from realtime.core.frames import VideoFrame
from realtime.io.file_sinks import Finalise, VideoFileSink, _fraction
from realtime.io.frame_fit import DEFAULT_FPS, _even
from realtime.io.nvdec_device import nvc_errors, nvdec_available
from realtime.io.output_info import OutputInfo
from realtime.io.partial_files import PartialFile, _reason, _write_error

log = logging.getLogger(__name__)

NVENC_CODECS = ("h264", "hevc")
NVENC_CONTAINERS = frozenset({".mp4", ".mkv", ".mov"})
# H.264 NAL type 5 = IDR slice; HEVC NAL types 16-21 = BLA/IDR/CRA (random access points).
_H264_IDR = 5
_HEVC_IRAP = range(16, 22)


def nvenc_available() -> tuple[bool, str]:
    """Same check as NVDEC: both live in PyNvVideoCodec, whose import needs the NVIDIA driver."""
    return nvdec_available()


def bgr_to_nv12(image: ImageBGR, out: npt.NDArray[np.uint8] | None = None) -> npt.NDArray[np.uint8]:
    """(1.5 H, W) NV12 from an even-sized BGR image: OpenCV's BT.601 I420, chroma interleaved."""
    h, w = image.shape[:2]
    i420 = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
    nv12 = np.empty((h * 3 // 2, w), np.uint8) if out is None else out
    nv12[:h] = i420[:h]
    quarter = (h // 2) * (w // 2)
    chroma = i420[h:].reshape(-1)
    uv = nv12[h:].reshape(-1, 2)
    uv[:, 0] = chroma[:quarter]
    uv[:, 1] = chroma[quarter:]
    return nv12


def is_keyframe(data: bytes, codec: str) -> bool:
    """Whether an Annex B access unit holds a random-access picture (scans its NAL headers)."""
    i = data.find(b"\x00\x00\x01")
    while i >= 0 and i + 3 < len(data):
        header = data[i + 3]
        if codec == "h264" and header & 0x1F == _H264_IDR:
            return True
        if codec == "hevc" and (header >> 1) & 0x3F in _HEVC_IRAP:
            return True
        i = data.find(b"\x00\x00\x01", i + 3)
    return False


class NvencFileSink:
    """A video file encoded by NVENC (low-latency preset, no B-frames), or by VideoFileSink when
    NVENC is unavailable. pts come from the frame index, like VideoFileSink."""

    def __init__(
        self,
        path: str | Path,
        gpu_id: int = 0,
        codec: str = "h264",
        preset: str = "P4",
        tuning_info: str = "low_latency",
        bitrate: int | None = None,
        tags: Mapping[str, str] | None = None,
        finalise: Finalise | None = None,
    ) -> None:
        if codec not in NVENC_CODECS:
            raise ValueError(f"codec must be one of {NVENC_CODECS}, got {codec!r}")
        self._file = PartialFile(Path(path))  # finished as VideoFileSink's are: one way for every file
        self.gpu_id = gpu_id
        self.codec = codec
        self.preset = preset
        self.tuning_info = tuning_info
        self.bitrate = bitrate
        self.tags = dict(tags or {})
        self.finalise = finalise
        self.fallback_reason = ""
        self.frames_written = 0
        self._fallback: VideoFileSink | None = None
        self._encoder: Any = None
        self._errors: tuple[type[BaseException], ...] = nvc_errors(None)
        self._container: av.container.OutputContainer | None = None
        self._stream: Any = None
        self._buffer: ImageBGR | None = None
        self._nv12: npt.NDArray[np.uint8] | None = None
        self._pending_pts: collections.deque[int] = collections.deque()
        self._first_index: int | None = None
        self._last_pts = -1
        self._last_muxed = -1

    @property
    def path(self) -> Path:
        return self._fallback.path if self._fallback is not None else self._file.path

    @property
    def description(self) -> str:
        if self._fallback is not None:
            return f"{self._fallback.description} (NVENC not used: {self.fallback_reason})"
        return f"video file {self.path} ({self.codec} via NVENC on GPU {self.gpu_id})"

    def output_info(self) -> OutputInfo:
        return OutputInfo(record_path=self.path)

    def open(self, width: int, height: int, fps: float) -> None:
        w, h, rate = _even(width), _even(height), fps or DEFAULT_FPS
        try:
            nvc = importlib.import_module("PyNvVideoCodec")
        except (ImportError, RuntimeError) as err:  # no wheel, or no driver
            self._fall_back(width, height, fps, err)
            return
        self._errors = nvc_errors(nvc)
        try:
            self._encoder = self._create_encoder(nvc, w, h, rate)
        except self._errors as err:  # e.g. a GPU without NVENC (A100, H100): PyNvVCException
            self._fall_back(width, height, fps, err)
            return
        temp = self._file.begin()
        try:
            container = av.open(str(temp), mode="w", options=self._file.container_options)
            if self.tags:
                container.metadata.update(self.tags)
            # A stream without a codec context: NVENC's packets are muxed as they are.
            stream = container.add_mux_stream(self.codec, rate=_fraction(rate), width=w, height=h)
            stream.time_base = 1 / _fraction(rate)
        except (ValueError, OSError, av.error.FFmpegError) as err:
            self._encoder = None
            self._file.discard()
            raise SinkError(
                f"Cannot write video {self.path} ({_reason(err)}).",
                hint="Use .mp4, .mkv or .mov for NVENC output.",
            ) from err
        self._container, self._stream = container, stream
        self._buffer = np.zeros((h, w, 3), np.uint8)
        self._nv12 = np.empty((h * 3 // 2, w), np.uint8)
        self._pending_pts.clear()
        self._first_index = None
        self._last_pts = self._last_muxed = -1
        self.frames_written = 0

    def _fall_back(self, width: int, height: int, fps: float, err: BaseException) -> None:
        self.fallback_reason = _first_line(err)
        log.warning("NVENC not used for %s (%s); encoding on the CPU.", self.path, self.fallback_reason)
        self._fallback = VideoFileSink(self.path, tags=self.tags, finalise=self.finalise)
        self._fallback.open(width, height, fps)

    def _write_errors(self) -> tuple[type[BaseException], ...]:
        return (OSError, av.error.FFmpegError, *self._errors)

    def _create_encoder(self, nvc: Any, width: int, height: int, fps: float) -> Any:
        options: dict[str, Any] = {
            "codec": self.codec,
            "preset": self.preset,
            "tuning_info": self.tuning_info,
            "fps": f"{fps:.3f}".rstrip("0").rstrip("."),  # parsed as a fraction: 29.97 stays 29.97
            # A keyframe (IDR) every 2 s: left unset, NVENC's GOP is infinite, i.e. one IDR for the
            # whole file (no seeking, and a decode error would last to the end).
            "gop": max(1, round(2 * fps)),
            "idrperiod": max(1, round(2 * fps)),
            "bf": 0,  # no B-frames: packets come out in input order, one per frame, no reordering delay
            "gpu_id": self.gpu_id,
        }
        if self.bitrate:
            options.update(rc="cbr", bitrate=self.bitrate)
        # usecpuinputbuffer=True: the frames are numpy NV12 on the host (docs/gpu-api-facts.md §1).
        return nvc.CreateEncoder(width, height, "NV12", True, **options)

    def send(self, frame: VideoFrame) -> None:
        if self._fallback is not None:
            self._fallback.send(frame)
            return
        if self._encoder is None or self._buffer is None or self._nv12 is None:
            raise RuntimeError("NvencFileSink.send() called before open()")
        image = VideoFileSink._fit(frame.image, self._buffer)
        bgr_to_nv12(np.ascontiguousarray(image), self._nv12)
        if self._first_index is None:
            self._first_index = frame.index
        self._last_pts = max(frame.index - self._first_index, self._last_pts + 1)
        self._pending_pts.append(self._last_pts)
        try:
            # A flat view like PyNvVideoCodec's encode sample feeds (np.fromfile of one frame).
            self._mux(self._encoder.Encode(self._nv12.reshape(-1)))
        except self._write_errors() as err:
            self.abort()
            raise _write_error(self.path, err) from err
        self.frames_written += 1

    def _mux(self, packets: Any) -> None:
        assert self._container is not None
        for item in _packet_payloads(packets):
            pts = self._pending_pts.popleft() if self._pending_pts else self._last_muxed + 1
            self._last_muxed = pts
            packet = av.Packet(item)
            packet.stream = self._stream
            packet.time_base = self._stream.time_base
            packet.pts = packet.dts = pts
            packet.is_keyframe = is_keyframe(item, self.codec)
            self._container.mux(packet)

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()
            return
        container, encoder = self._container, self._encoder
        if container is None or encoder is None:
            return
        if self.frames_written == 0:
            log.warning("No frames were produced, so %s was not written.", self.path)
            self.abort()
            return
        try:
            self._mux(encoder.EndEncode())  # the frames NVENC still holds
            container.close()
            self._container = self._encoder = None
            self._file.finish()
        except self._write_errors() as err:
            self.abort()
            raise _write_error(self.path, err) from err
        self._file.check_end()
        if self.finalise is not None:
            self.finalise(self.path)

    def abort(self) -> None:
        if self._fallback is not None:
            self._fallback.abort()
            return
        container = self._container
        self._container = self._encoder = None
        if container is not None:
            try:
                container.close()
            except (OSError, av.error.FFmpegError) as err:
                log.debug("Error while discarding %s: %s", self._file.temp, err)
        self._file.discard()


def _packet_payloads(packets: Any) -> list[bytes]:
    """Encode()/EndEncode() return a list of {'data', 'timestamp', 'picture_type'} dicts in 2.2.4
    (docs/gpu-api-facts.md §1); older releases returned one bytes-like bitstream. Both are accepted."""
    if packets is None:
        return []
    if isinstance(packets, bytes | bytearray | memoryview | np.ndarray):
        data = bytes(packets)
        return [data] if data else []
    payloads = []
    for item in packets:
        data = bytes(item["data"] if isinstance(item, dict) else item)
        if data:
            payloads.append(data)
    return payloads


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
