"""Several outputs at once (virtual camera + recording), and outputs that may fail on their own.

FanOutSink sends every frame to each of its sinks in turn, on the engine's sink thread. OptionalSink
wraps the virtual camera so a missing driver is reported once and the rest of the run goes on
(preview and recording keep working) instead of failing the whole start. BackgroundSink runs the
recording on its own thread, so its H.264 encode does not delay the virtual camera (what it would
cost: docs/PERFORMANCE.md), and a full disk stops the recording, not the call's camera.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from models.errors import FaceCastError
from realtime.core.contracts import FrameSink
from realtime.core.errors import SinkError, VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame

log = logging.getLogger(__name__)


class FanOutSink:
    """A FrameSink that forwards to several sinks. With none it is a preview-only output."""

    def __init__(self, sinks: Sequence[FrameSink]) -> None:
        self.sinks = tuple(sinks)
        self._opened: list[FrameSink] = []

    @property
    def description(self) -> str:
        return " + ".join(s.description for s in self.sinks) or "preview only"

    @property
    def inner_sinks(self) -> Sequence[FrameSink]:
        return self.sinks

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
    error and every later call does nothing, so the other outputs carry on. The same when it fails
    mid-run (the device removed): `on_lost` is told, and the recording is not thrown away with it."""

    def __init__(
        self,
        sink: FrameSink,
        on_unavailable: Callable[[VirtualCameraUnavailableError], None],
        on_lost: Callable[[FaceCastError], None] | None = None,
    ) -> None:
        self.sink = sink
        self._on_unavailable = on_unavailable
        self._on_lost = on_lost
        self.active = False

    @property
    def description(self) -> str:
        return self.sink.description if self.active else "virtual camera (unavailable)"

    @property
    def inner_sinks(self) -> Sequence[FrameSink]:
        return (self.sink,) if self.active else ()

    def open(self, width: int, height: int, fps: float) -> None:
        try:
            self.sink.open(width, height, fps)
        except VirtualCameraUnavailableError as exc:
            self.active = False
            self._on_unavailable(exc)
            return
        self.active = True

    def send(self, frame: VideoFrame) -> None:
        if not self.active:
            return
        try:
            self.sink.send(frame)
        except FaceCastError as exc:
            self.active = False
            log.warning("%s stopped: %s", self.sink.description, exc.user_message())
            try:
                self.sink.abort()
            except Exception as abort_error:
                log.warning("discarding %s failed: %s", self.sink.description, abort_error)
            if self._on_lost is None:
                raise  # nobody to tell: the failure ends the run
            self._on_lost(exc)

    def close(self) -> None:
        if self.active:
            self.active = False
            self.sink.close()

    def abort(self) -> None:
        if self.active:
            self.active = False
            self.sink.abort()


_END = object()  # tells the writer thread that no more frames come


class BackgroundSink:
    """Runs a slow sink on its own thread behind a short queue.

    open() runs here (a bad path still fails the start); frames are queued and written by the
    thread; a frame that finds the queue full is dropped and counted (a recording places frames by
    their time, so a drop is a short freeze in the file, not a shift). A failure while writing
    stops only this sink: `on_failed` gets the error (from the writer thread) and the other
    outputs carry on. close() waits for the queued frames and finalises the sink.
    """

    def __init__(self, sink: FrameSink, on_failed: Callable[[FaceCastError], None], depth: int = 8) -> None:
        self.sink = sink
        self._on_failed = on_failed
        self._depth = depth
        self._queue: queue.Queue[object] = queue.Queue(depth)
        self._thread: threading.Thread | None = None
        self._failed: FaceCastError | None = None
        self._close_error: BaseException | None = None
        self._discard = False
        self._drop_rest = False
        self.dropped = 0
        self.finish_timeout_s = 3.0

    @property
    def description(self) -> str:
        return f"{self.sink.description} (stopped)" if self._failed is not None else self.sink.description

    @property
    def inner_sinks(self) -> Sequence[FrameSink]:
        return () if self._failed is not None and self._thread is None else (self.sink,)

    @property
    def failed(self) -> FaceCastError | None:
        return self._failed

    def open(self, width: int, height: int, fps: float) -> None:
        """Opens the sink here; one that cannot open (a folder it may not write) stops alone as one
        failing later does: `on_failed` is told and the other outputs open and run."""
        self._failed = self._close_error = None
        try:
            self.sink.open(width, height, fps)
        except FaceCastError as exc:
            self._thread = None
            self._fail(exc)
            return
        self._queue = queue.Queue(self._depth)
        self._discard = self._drop_rest = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._write_loop, name="recorder", daemon=True)
        self._thread.start()

    def send(self, frame: VideoFrame) -> None:
        if self._thread is None or self._failed is not None:
            return
        try:
            self._queue.put_nowait(frame)  # the frame owns its image: keeping it is safe
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        """Write what is queued, then finalise; a finalising error is raised here."""
        self._finish(discard=False)
        error, self._close_error = self._close_error, None
        if error is not None:
            raise error

    def abort(self) -> None:
        self._finish(discard=True)

    def _finish(self, *, discard: bool) -> None:
        """Hand the writer its end and wait up to `finish_timeout_s`; a writer stuck on a stalled
        disk then finishes (and finalises) on its own, so Stop and quitting are not held hostage."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._discard = discard
        deadline = time.monotonic() + self.finish_timeout_s
        try:
            self._queue.put(_END, timeout=self.finish_timeout_s)
        except queue.Full:
            self._drop_rest = True  # the writer is stuck: what is still queued is skipped, then it closes
            log.warning("%s is not keeping up; finishing it in the background", self.sink.description)
            threading.Thread(target=self._queue.put, args=(_END,), name="recorder-end", daemon=True).start()
            return
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            log.warning(
                "%s is still being written; it will be finished in the background", self.sink.description
            )

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END:
                break
            if self._failed is not None or self._discard or self._drop_rest:
                continue  # drain: after a failure (or on abort, or a stuck close) nothing more is written
            try:
                self.sink.send(item)  # type: ignore[arg-type]
            except Exception as exc:
                self._fail(exc)
        try:
            if self._discard or self._failed is not None:
                self.sink.abort()  # a failed sink has already kept or removed its file itself
            else:
                self.sink.close()
        except Exception as exc:
            self._close_error = exc  # raised by close() when it is still waiting; logged either way
            log.warning("finishing %s failed: %s", self.sink.description, exc)

    def _fail(self, exc: Exception) -> None:
        error = exc if isinstance(exc, FaceCastError) else SinkError(f"{self.sink.description} failed: {exc}")
        self._failed = error
        log.warning("%s stopped: %s", self.sink.description, error.user_message())
        try:
            self._on_failed(error)
        except Exception:
            log.exception("reporting a failed output raised")
