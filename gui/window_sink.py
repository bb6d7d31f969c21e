"""`--output window`: a plain Qt window that shows the newest frame.

Threading: create the window with ensure_window() on the Qt GUI thread (the sink object itself may be
built earlier, before the QApplication); the engine thread then calls send/close/abort. Frames cross
threads through a queued signal carrying nothing: the sink keeps one pending frame (latest wins), so
a slow GUI drops stale frames instead of queueing them.
"""

from __future__ import annotations

import threading

import numpy as np
from PyQt6.QtCore import QCoreApplication, QObject, Qt, QThread, pyqtSignal
from PyQt6.QtGui import QCloseEvent, QImage, QPixmap
from PyQt6.QtWidgets import QLabel, QWidget

from realtime.api import VideoFrame


class _FrameWindow(QLabel):
    """The window itself; sets `closed` when the user closes it (which stops the run)."""

    def __init__(self, title: str, closed: threading.Event, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._closed = closed
        self.setWindowTitle(title)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setStyleSheet("background: black;")
        self.setMinimumSize(160, 90)

    def closeEvent(self, event: QCloseEvent | None) -> None:
        self._closed.set()
        super().closeEvent(event)


class _Bridge(QObject):
    """Lives on the GUI thread; its signals, emitted from the engine thread, run slots there."""

    frame_ready = pyqtSignal()
    open_requested = pyqtSignal(int, int)
    close_requested = pyqtSignal()


class WindowSink:
    """A FrameSink that shows frames in a window. Closing the window sets `closed`.

    Constructing it touches no Qt object, so it can be built before the QApplication exists; the
    window is made by ensure_window() (or by open() when called on the GUI thread).
    """

    def __init__(self, title: str = "FaceCast") -> None:
        self.title = title
        self.closed = threading.Event()
        self.frames_shown = 0
        self.last_shown_index: int | None = None
        self._lock = threading.Lock()
        self._pending: VideoFrame | None = None
        self._window: _FrameWindow | None = None
        self._bridge: _Bridge | None = None

    @property
    def description(self) -> str:
        return "window"

    @property
    def window(self) -> QLabel:
        """The window widget (GUI thread only)."""
        return self.ensure_window()

    def ensure_window(self) -> QLabel:
        """Creates the (hidden) window once. Call on the Qt GUI thread after the QApplication exists."""
        if self._window is None:
            window = _FrameWindow(self.title, self.closed)
            bridge = _Bridge()
            # Always queued (the stubs omit connect's type argument): widgets may only be touched on
            # the GUI thread, and a queued emit from the GUI thread itself still coalesces frames.
            queued = Qt.ConnectionType.QueuedConnection
            bridge.frame_ready.connect(self._show_pending, queued)  # type: ignore[call-arg]
            bridge.open_requested.connect(self._show_window, queued)  # type: ignore[call-arg]
            bridge.close_requested.connect(window.close, queued)  # type: ignore[call-arg]
            self._window, self._bridge = window, bridge
        return self._window

    def open(self, width: int, height: int, fps: float) -> None:
        if self._bridge is None:
            app = QCoreApplication.instance()
            if app is None or QThread.currentThread() != app.thread():
                raise RuntimeError("WindowSink.ensure_window() must run on the Qt GUI thread before open()")
            self.ensure_window()
        assert self._bridge is not None
        self.closed.clear()
        self._bridge.open_requested.emit(width, height)

    def send(self, frame: VideoFrame) -> None:
        bridge = self._bridge
        if bridge is None:
            raise RuntimeError("WindowSink.send() called before open()")
        if self.closed.is_set():
            return  # the user closed the window; the engine sees `closed` and stops
        with self._lock:
            signal_in_flight = self._pending is not None
            self._pending = frame
        # One queued signal at a time: a newer frame replaces the pending one, and the slot picks up
        # whichever frame is newest when it runs.
        if not signal_in_flight:
            bridge.frame_ready.emit()

    def close(self) -> None:
        with self._lock:
            self._pending = None
        if self._bridge is not None:
            self._bridge.close_requested.emit()

    def abort(self) -> None:
        self.close()

    def _show_window(self, width: int, height: int) -> None:
        window = self.ensure_window()
        window.resize(width, height)
        window.show()

    def _show_pending(self) -> None:
        with self._lock:
            frame, self._pending = self._pending, None
        if frame is None or self.closed.is_set():
            return
        window = self.ensure_window()
        image = np.ascontiguousarray(frame.image)
        h, w = image.shape[:2]
        # A view, not a copy (the stubs only know bytes); fromImage below copies the pixels.
        qimage = QImage(image.data, w, h, image.strides[0], QImage.Format.Format_BGR888)  # type: ignore[call-overload]
        pixmap = QPixmap.fromImage(qimage).scaled(
            window.size(),
            Qt.AspectRatioMode.KeepAspectRatio,
            Qt.TransformationMode.SmoothTransformation,
        )
        window.setPixmap(pixmap)
        self.frames_shown += 1
        self.last_shown_index = frame.index
