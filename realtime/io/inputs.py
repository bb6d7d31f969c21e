"""The one router from an input to its FrameSource: a new kind of source is added here.

The command line names its input in one string (a camera index, /dev/videoN, a video file, an
image, a stream's address); the window says what it is (`kind`). Which decoder reads a video
depends on where the models run: NVDEC pays off only when they run on the GPU too (else its frames
come back to the host), so the provider is part of the choice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from realtime.core.contracts import FrameSource
from realtime.io.camera_source import CameraSource
from realtime.io.source_parts import Decoder
from realtime.io.sources import open_source, refuse_stream_url
from realtime.io.test_pattern import TestPatternSource
from realtime.io.video_file import VideoFileSource

# "any": the command line's string, read as open_source does; "camera": a camera index; "video": a
# video file (a stream's address is refused); "pattern": the built-in test pattern (no spec).
InputKind = Literal["any", "camera", "video", "pattern"]
GPU_PROVIDERS = ("cuda", "tensorrt")


def open_input(
    spec: str,
    *,
    realtime: bool | None,
    loop: bool,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    decoder: Decoder = "auto",
    provider: str = "cpu",
    gpu_id: int = 0,
    kind: InputKind = "any",
) -> tuple[FrameSource, str]:
    """The source for an input, and a sentence on its decoding ('' when there is nothing to say).
    The caller calls open() (and close()).

    provider: where the models run, already resolved ("auto" is the caller's to resolve): NVDEC is
    tried only under a GPU provider, or when `decoder` is "nvdec". decoder: see nvdec.open_nvdec_input.
    """
    if provider == "auto":
        raise ValueError("open_input() needs the provider 'auto' resolves to, not 'auto'")
    if kind == "pattern":
        if width is None or height is None or fps is None:
            raise ValueError("the test pattern needs its width, height and fps")
        return TestPatternSource(width, height, fps), ""
    if kind == "camera":
        return CameraSource(int(spec), width=width, height=height, fps=fps), ""
    if kind == "video":
        refuse_stream_url(spec)
    if provider in GPU_PROVIDERS or decoder == "nvdec":
        # Looked up on the module at the call: tests stand in for the NVDEC side there.
        from realtime.io import nvdec

        return nvdec.open_nvdec_input(
            spec, realtime=realtime, loop=loop, width=width, height=height, fps=fps,
            decoder=decoder, gpu_id=gpu_id,
        )  # fmt: skip
    if kind == "video":
        return VideoFileSource(Path(spec), realtime=bool(realtime), loop=loop), ""
    return open_source(spec, realtime=realtime, loop=loop, width=width, height=height, fps=fps), ""
