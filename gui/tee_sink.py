"""Several outputs at once (virtual camera + recording), and an output that may be unavailable.

FanOutSink sends every frame to each of its sinks in turn, on the engine's sink thread. OptionalSink
wraps the virtual camera so a missing driver is reported once and the rest of the run goes on
(preview and recording keep working) instead of failing the whole start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from models.errors import VirtualCameraUnavailableError
from realtime.frames import VideoFrame
from realtime.sinks import FrameSink

log = logging.getLogger(__name__)


class FanOutSink:
    """A FrameSink that forwards to several sinks. With none it is a preview-only output."""

    def __init__(self, sinks: Sequence[FrameSink]) -> None:
        self.sinks = tuple(sinks)
        self._opened: list[FrameSink] = []

    @property
    def description(self) -> str:
        return " + ".join(s.description for s in self.sinks) or "preview only"

    def open(self, width: int, height: int, fps: float) -> None:
        self._opened = []
        for sink in self.sinks:
            try:
                sink.open(width, height, fps)
            except BaseException:
                self.abort()  # leave no device open and no partial file behind
                raise
            self._opened.append(sink)

    def send(self, frame: VideoFrame) -> None:
        for sink in self._opened:
            sink.send(frame)

    def close(self) -> None:
        """Close every sink, even when one fails; the first failure is raised afterwards."""
        opened, self._opened = self._opened, []
        first: BaseException | None = None
        for sink in opened:
            try:
                sink.close()
            except Exception as exc:
                log.warning("closing %s failed: %s", sink.description, exc)
                first = first or exc
        if first is not None:
            raise first

    def abort(self) -> None:
        opened, self._opened = self._opened, []
        for sink in opened:
            try:
                sink.abort()
            except Exception as exc:
                log.warning("discarding %s failed: %s", sink.description, exc)


class OptionalSink:
    """Wraps a virtual camera sink: when its driver is missing, open() calls `on_unavailable` with the
    error and every later call does nothing, so the other outputs carry on."""

    def __init__(
        self, sink: FrameSink, on_unavailable: Callable[[VirtualCameraUnavailableError], None]
    ) -> None:
        self.sink = sink
        self._on_unavailable = on_unavailable
        self.active = False

    @property
    def description(self) -> str:
        return self.sink.description if self.active else "virtual camera (unavailable)"

    def open(self, width: int, height: int, fps: float) -> None:
        try:
            self.sink.open(width, height, fps)
        except VirtualCameraUnavailableError as exc:
            self.active = False
            self._on_unavailable(exc)
            return
        self.active = True

    def send(self, frame: VideoFrame) -> None:
        if self.active:
            self.sink.send(frame)

    def close(self) -> None:
        if self.active:
            self.active = False
            self.sink.close()

    def abort(self) -> None:
        if self.active:
            self.active = False
            self.sink.abort()
