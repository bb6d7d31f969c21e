"""The one router from an output name to a FrameSink, for the command line and the GUI alike.

An output is "vcam", "null", "window" (built by the caller's GUI layer, passed in as `window`),
an image path, or else a video path. The video encoder is the CPU's (PyAV) or NVENC where it can
run; the sink comes wrapped the way the caller asks: optional (a missing virtual camera driver
is reported, the other outputs carry on) or in the background (a recording on its own thread).
Every file it writes says that faces were modified by AI: a signed C2PA manifest embedded once
the file is finished, where the format takes one, and container tags (realtime.io.provenance).
A new kind of output is added here only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from models.errors import FaceCastError
from realtime.core.contracts import FrameSink
from realtime.core.errors import OutputExistsError, SinkError, VirtualCameraUnavailableError
from realtime.io.fan_out import BackgroundSink, FanOutSink, OptionalSink
from realtime.io.file_sinks import IMAGE_EXTENSIONS, Finalise, ImageFileSink, VideoFileSink
from realtime.io.provenance import provenance_tags, sign_in_place
from realtime.io.sinks import NullSink
from realtime.io.vcam_sink import VirtualCameraSink

Encoder = Literal["cpu", "nvenc"]
# "auto": the name says what it is (a keyword, an image or a video); "video": it is a video path
# whatever it is called (the GUI's recording).
FileKind = Literal["auto", "video"]


@dataclass(frozen=True, slots=True)
class OutputRequest:
    """One output and how it is built.

    width/height/fps: the virtual camera's picture (None: the source's). pace: the virtual camera
    keeps its own clock (for sources that deliver frames as fast as they can).
    encoder: "nvenc" encodes .mp4/.mkv/.mov on the GPU where PyNvVideoCodec imports (the sink
    still falls back to the CPU at open() if NVENC cannot start).
    window: builds the preview window's sink (the GUI layer's WindowSink); without it "window" is
    an error.
    on_unavailable: set, the virtual camera is optional (OptionalSink): a missing driver is
    reported to it and the run goes on; on_lost is told when it fails mid-run.
    on_failed: set, the sink runs on its own thread (BackgroundSink) and a failure, at open or
    while writing, stops it alone: on_failed is told and the other outputs carry on.
    new_take: a video file never replaces one of its name (`NAME-2.EXT`, ... instead).
    file_options: VideoFileSink's own options (codec, crf, ...).
    provenance: a file output is tagged and, once finished, signed (sign_in_place); False leaves
    it as it was encoded.
    run_id: the run whose watermark the frames carry (Engine's run_id): the signed manifest
    names it.
    """

    spec: str
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    vcam_backend: str | None = None
    vcam_device: str | None = None
    pace: bool = True
    encoder: Encoder = "cpu"
    gpu_id: int = 0
    file_kind: FileKind = "auto"
    window: Callable[[], FrameSink] | None = None
    on_unavailable: Callable[[VirtualCameraUnavailableError], None] | None = None
    on_lost: Callable[[FaceCastError], None] | None = None
    on_failed: Callable[[FaceCastError], None] | None = None
    new_take: bool = False
    file_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    provenance: bool = True
    run_id: str | None = None


def open_output(spec: str, **options: Any) -> FrameSink:
    """The sink for one output (see OutputRequest for `options`); the caller calls open()."""
    return route_output(OutputRequest(spec, **split_request_options(options)))[0]


def open_outputs(requests: Sequence[OutputRequest]) -> FanOutSink:
    """Several outputs at once, each built as route_output builds it; none is a preview-only output."""
    return FanOutSink([route_output(request)[0] for request in requests])


def route_output(request: OutputRequest) -> tuple[FrameSink, str]:
    """The sink, wrapped as asked, and a sentence saying which encoder writes it and why when
    there was a choice to make (NVENC asked for), else ''."""
    sink, note = _encoded_sink(request)
    if request.on_unavailable is not None and isinstance(sink, VirtualCameraSink):
        sink = OptionalSink(sink, request.on_unavailable, request.on_lost)
    if request.on_failed is not None:
        sink = BackgroundSink(sink, request.on_failed)
    return sink, note


def _encoded_sink(request: OutputRequest) -> tuple[FrameSink, str]:
    if request.encoder != "nvenc":
        return _cpu_sink(request), ""
    # Imported here: NVENC's module loads the GPU codec helpers, which CPU runs never need.
    from realtime.io.nvenc import NVENC_CONTAINERS, NvencFileSink, nvenc_available

    path = Path(request.spec)
    suffix = path.suffix.lower()
    if suffix not in NVENC_CONTAINERS or suffix in IMAGE_EXTENSIONS:
        return _cpu_sink(request), "not a video file NVENC writes (.mp4, .mkv, .mov)"

    ok, why = nvenc_available()
    if not ok:
        return _cpu_sink(request), f"encoding on the CPU: NVENC not available ({why})"
    sink = NvencFileSink(path, gpu_id=request.gpu_id, **_provenance(request))
    return sink, f"encoding with NVENC on GPU {request.gpu_id} ({why})"


def _provenance(request: OutputRequest) -> dict[str, Any]:
    """A video file sink's tags and finalise hook (see OutputRequest.provenance)."""
    return {"tags": provenance_tags(), "finalise": _finalise(request)} if request.provenance else {}


def _finalise(request: OutputRequest) -> Finalise | None:
    return partial(sign_in_place, run_id=request.run_id) if request.provenance else None


def _video_sink(request: OutputRequest) -> VideoFileSink:
    options = {**_provenance(request), **request.file_options, "new_take": request.new_take}
    return VideoFileSink(Path(request.spec), **options)


def _cpu_sink(request: OutputRequest) -> FrameSink:
    spec = request.spec
    if request.file_kind == "video":
        return _video_sink(request)
    keyword = spec.strip().lower()
    if keyword == "vcam":
        return VirtualCameraSink(
            request.width,
            request.height,
            request.fps,
            backend=request.vcam_backend,
            device=request.vcam_device,
            pace=request.pace,
        )
    if keyword == "null":
        return NullSink()
    if keyword == "window":
        if request.window is not None:
            return request.window()
        raise SinkError(
            "The window output needs the Qt GUI.",
            hint="Create it with gui.window_sink.WindowSink on the Qt thread.",
        )
    path = Path(spec)
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return ImageFileSink(path, finalise=_finalise(request))
    return _video_sink(request)


OUTPUT_KEYWORDS = ("vcam", "window", "null")


def output_file(spec: str) -> Path | None:
    """The file an output name writes, or None for a keyword (vcam, window, null)."""
    name = spec.strip()
    if not name or name.lower() in OUTPUT_KEYWORDS:
        return None
    return Path(name).expanduser()


def check_output_free(spec: str, overwrite: bool) -> None:
    """Refuse, before anything is opened or loaded, an output file that is there already unless
    replacing it was asked for: a run must never destroy a file it was not told to replace."""
    path = output_file(spec)
    if path is None or overwrite or not path.exists() or path.is_dir():
        return  # a folder is refused by the sink, with its own message
    raise OutputExistsError(
        f"{path} exists already; nothing was written.",
        hint="Pass --overwrite to replace it, or choose another output name.",
    )


_REQUEST_FIELDS = frozenset(OutputRequest.__dataclass_fields__) - {"spec", "file_options"}


def split_request_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """OutputRequest's own keywords as they are; every other keyword is a VideoFileSink option."""
    own = {k: v for k, v in options.items() if k in _REQUEST_FIELDS}
    extra = {k: v for k, v in options.items() if k not in _REQUEST_FIELDS}
    if extra:
        own["file_options"] = MappingProxyType(extra)
    return own
