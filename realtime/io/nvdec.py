"""NVDEC sources: H.264/HEVC decoded by the GPU into GPU memory, behind the FrameSource protocol.

PyNvVideoCodec (docs/gpu-api-facts.md §1) decodes into NV12 surfaces that belong to the decoder and are
reused by later Decode() calls. Each decoded surface is therefore copied at once into a buffer that
FaceCast owns (`DeviceNV12`), after making the copy wait for the decoder's per-frame event. Frames
are handed out as `DeviceVideoFrame`: a VideoFrame whose `device` is that NV12 buffer, and whose
`image` (BGR on the host) is only made when a CPU consumer reads it: one download plus one colour
conversion, once per frame. A GPU pipeline (models/runtime/iobinding.py) binds `device.ptr` instead.

The CUDA work needed here (a stream, device copies, one download) goes through the CUDA driver API
with ctypes, so neither torch nor CuPy is required; that part, and the device frames, are in
realtime.io.nvdec_device.

- NvdecFileSource: a video file, demuxed by PyNvVideoCodec's own demuxer.
- NvdecStreamSource: a network stream (RTSP, RTMP, HTTP, SRT, UDP) or a camera that sends H.264
  (/dev/videoN via V4L2, DirectShow), read as compressed packets with PyAV and fed to NVDEC in low
  latency mode.
- open_gpu_source: the NVDEC source where it can work, else realtime.io.sources.open_source, plus a
  sentence saying which and why; open_nvdec_input: that with the decoder asked for (the NVDEC side of
  the input router, realtime.io.inputs.open_input).

This module is not verified on a GPU: see docs/GPU.md, "Not verified on a GPU".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import av.bitstream
import av.error
import numpy as np

from models.ops.yuv import BT601_LIMITED, YuvColour, colour_of
from realtime.core.contracts import FrameSource
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame
from realtime.io.nvdec_device import (
    MAX_FRAMES_BEHIND,
    CtypesCudaDriver,
    CudaDriver,
    DeviceNV12,
    DeviceVideoFrame,
    SurfaceCopier,
    first_line,
    import_nvc,
    nvc_errors,
    nvdec_available,
)
from realtime.io.source_parts import DEFAULT_FPS, Decoder, KnownFormat, Pacer
from realtime.io.sources import IMAGE_EXTENSIONS, FallbackSource, camera_index, open_source
from realtime.io.video_file import GAP_S, playback_mode, require_video_file

# Importable from here, where the sources that use them are.
__all__ = [
    "NvdecFileSource",
    "NvdecStreamSource",
    "is_stream_spec",
    "open_gpu_source",
    "open_nvdec_input",
    "stream_open_args",
]

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
        nvc = import_nvc()
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
            raise SourceError(f"{self.description}: NVDEC decoding failed ({first_line(err)}).") from err
        while self._drop_behind and len(self._queue) > MAX_FRAMES_BEHIND:
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
            raise SourceError(f"NVDEC cannot read {self.path} ({first_line(err)}).") from err
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
                raise SourceError(f"NVDEC cannot reopen {self.path} to loop ({first_line(err)}).") from err
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
            raise SourceError(f"Cannot open {self.spec} ({first_line(err)}).") from err
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
            raise SourceError(f"NVDEC cannot decode {self.spec} ({first_line(err)}).") from err
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
                raise SourceError(f"{self.spec}: the stream broke off ({first_line(err)}).") from err
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


def open_nvdec_input(
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
