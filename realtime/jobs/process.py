"""One chunk of a file job through the engine: its frames read from the input, the warm-up frames
processed and dropped, the chunk's own frames written to a video-only work file at their own
media times."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from realtime.api import (
    EngineEvent,
    FaceCastError,
    Run,
    Settings,
    StageFactory,
    VideoFileSink,
    VideoFileSource,
    VideoFrame,
)
from realtime.jobs.chunks import Chunk
from realtime.jobs.probe import MediaInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChunkResult:
    frames_written: int
    completed: bool  # False: stopped before the chunk's input ended


class _WarmupSkippingSink:
    """Passes on the frames from the chunk's start; the warm-up frames before it are dropped."""

    def __init__(
        self,
        inner: VideoFileSink,
        info: MediaInfo,
        start_pts: int,
        on_frame: Callable[[], None],
        source: VideoFileSource,
    ):
        self._inner = inner
        self._source = source
        self._tb = info.time_base
        self._start = start_pts
        self._on_frame = on_frame
        self.written = 0

    @property
    def description(self) -> str:
        return self._inner.description

    def open(self, width: int, height: int, fps: float) -> None:
        # The engine opens the source first: its rotation is known now. The chunk is stored
        # as the input is, its frames turned back from upright.
        self._inner.stored_rotation = self._source.rotation
        self._inner.open(width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        if frame.pts is not None and round(frame.pts / self._tb) < self._start:
            return
        self._inner.send(frame)
        self.written += 1
        self._on_frame()

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()


def run_chunk(
    info: MediaInfo,
    chunk: Chunk,
    work_file: Path,
    settings: Settings,
    stages: StageFactory,
    stop: threading.Event,
    on_frame: Callable[[], None] = lambda: None,
    run_id: str | None = None,
) -> ChunkResult:
    """Process `chunk` into `work_file`, which appears (atomically) only when the chunk is done;
    its frames carry `run_id`'s watermark (the job's, so that all its chunks carry one)."""
    temp = work_file.with_name(f"{work_file.stem}.writing{work_file.suffix}")
    source = VideoFileSource(info.path, start_pts=chunk.warm_pts, end_pts=chunk.end_pts)
    video = VideoFileSink(temp, time_base=info.time_base, b_frames=False)
    sink = _WarmupSkippingSink(video, info, chunk.start_pts, on_frame, source)

    def on_event(event: EngineEvent) -> None:
        if event.kind == "warning":  # an error ends the run and is raised below
            log.warning("chunk %d: %s", chunk.index, event.message)

    run = Run(source, sink, settings, stages, on_event=on_event, run_id=run_id)
    run.start()
    try:
        run.watch(stop.wait)
    finally:
        outcome = run.stop()
    if outcome.error is not None:
        _discard(temp)
        raise outcome.error
    if stop.is_set():
        _discard(temp)  # a cut chunk is redone whole: its frames are not kept
        return ChunkResult(sink.written, completed=False)
    if sink.written == 0:
        raise FaceCastError(f"No frame of chunk {chunk.index} could be decoded from {info.path}.")
    os.replace(temp, work_file)
    return ChunkResult(sink.written, completed=True)


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.warning("Could not remove %s: %s", path, err)
