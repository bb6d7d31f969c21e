"""The live preview: newest frame only, converted on the GUI thread, never slowing the pipeline.

- OriginalTap / TappedSource keep a copy of each captured frame (only while the view needs the
  original), so "original" and "side by side" show the very frame that was swapped.
- PreviewFeed is handed to Engine.subscribe_preview: on the sink thread it only swaps one slot and
  emits a signal when none is pending, so a busy GUI skips stale frames instead of queueing them.
- PreviewWidget scales the newest frame with OpenCV at paint time (one conversion per repaint).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from PyQt6.QtCore import QObject, QRect, QSize, Qt, pyqtSignal
from PyQt6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PyQt6.QtWidgets import QSizePolicy, QWidget

from gui.config import ViewMode
from realtime.api import Detection, FrameSource, ImageBGR, VideoFrame


class OriginalTap:
    """Copies of recently captured frames by index (bounded; oldest evicted). Thread-safe."""

    def __init__(self, capacity: int = 16) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._frames: OrderedDict[int, ImageBGR] = OrderedDict()
        self._enabled = False

    @property
    def enabled(self) -> bool:
        return self._enabled

    def set_enabled(self, on: bool) -> None:
        with self._lock:
            self._enabled = on
            if not on:
                self._frames.clear()

    def clear(self) -> None:
        """Forget every copy: a new run numbers its frames from 0 again, and the last run's copies
        (numbered higher) made take() answer None for its first frames."""
        with self._lock:
            self._frames.clear()

    def put(self, frame: VideoFrame) -> None:
        """Capture thread: remember a copy (the engine swaps the frame's own image in place)."""
        if not self._enabled:
            return
        copy = frame.image.copy()
        with self._lock:
            self._frames[frame.index] = copy
            while len(self._frames) > self._capacity:
                self._frames.popitem(last=False)

    def take(self, index: int) -> ImageBGR | None:
        """Sink thread: the original of frame `index`; older entries (dropped frames) are discarded."""
        with self._lock:
            while self._frames:
                first = next(iter(self._frames))
                if first > index:
                    return None
                image = self._frames.pop(first)
                if first == index:
                    return image
            return None


class TappedSource:
    """A FrameSource that hands each frame to an OriginalTap on the way through."""

    def __init__(self, source: FrameSource, tap: OriginalTap) -> None:
        self.inner = source
        self._tap = tap

    @property
    def size(self) -> tuple[int, int]:
        return self.inner.size

    @property
    def fps(self) -> float:
        return self.inner.fps

    @property
    def is_live(self) -> bool:
        return self.inner.is_live

    @property
    def description(self) -> str:
        return self.inner.description

    def open(self) -> None:
        self._tap.clear()
        self.inner.open()

    def read(self) -> VideoFrame | None:
        frame = self.inner.read()
        if frame is not None:
            self._tap.put(frame)
        return frame

    def close(self) -> None:
        self.inner.close()

    # The optional parts of a source, passed through: without them the engine could neither stop
    # a camera that is reconnecting nor tell the window that it is.
    def interrupt(self) -> None:
        interrupt = getattr(self.inner, "interrupt", None)
        if callable(interrupt):
            interrupt()

    @property
    def notify(self) -> Callable[[str, str], None] | None:
        return getattr(self.inner, "notify", None)

    @notify.setter
    def notify(self, value: Callable[[str, str], None] | None) -> None:
        if hasattr(self.inner, "notify"):
            self.inner.notify = value


@dataclass(frozen=True, slots=True)
class PreviewFrame:
    output: ImageBGR
    original: ImageBGR | None
    index: int


class PreviewFeed(QObject):
    """Engine preview subscriber: one pending frame, latest wins; `frame_ready` tells the GUI thread."""

    frame_ready = pyqtSignal()

    def __init__(self, tap: OriginalTap, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tap = tap
        self._lock = threading.Lock()
        self._pending: PreviewFrame | None = None
        self.offered = 0
        self.skipped = 0

    def offer(self, frame: VideoFrame) -> None:
        """Sink thread. Must return quickly: no conversion, no allocation beyond the record."""
        original = self.tap.take(frame.index) if self.tap.enabled else None
        item = PreviewFrame(frame.image, original, frame.index)
        with self._lock:
            signal_in_flight = self._pending is not None
            if signal_in_flight:
                self.skipped += 1
            self._pending = item
            self.offered += 1
        if not signal_in_flight:
            self.frame_ready.emit()

    def take(self) -> PreviewFrame | None:
        with self._lock:
            item, self._pending = self._pending, None
        return item


def _qimage(image: ImageBGR) -> QImage:
    """A QImage over the array's memory (the caller keeps the array alive while the image is used)."""
    h, w = image.shape[:2]
    return QImage(image.data, w, h, image.strides[0], QImage.Format.Format_BGR888)  # type: ignore[call-overload]


def _fit(src: QSize, box: QRect) -> QRect:
    """The largest rect with src's aspect ratio centred in box."""
    if src.width() <= 0 or src.height() <= 0 or box.width() <= 0 or box.height() <= 0:
        return QRect(box.topLeft(), QSize(0, 0))
    scale = min(box.width() / src.width(), box.height() / src.height())
    w, h = max(int(src.width() * scale), 1), max(int(src.height() * scale), 1)
    return QRect(box.x() + (box.width() - w) // 2, box.y() + (box.height() - h) // 2, w, h)


class PreviewWidget(QWidget):
    """Shows the newest frame as swapped, original, or both side by side, with an optional badge.

    Faces can be picked: with the faces found in the picture (`set_faces`), the one under the mouse
    is outlined, a left click on it emits `face_clicked(picture, landmarks)` (the original picture,
    unswapped) and a right click `unpick_requested`; moving over the preview asks for the faces
    (`faces_wanted`)."""

    face_clicked = pyqtSignal(object, object)
    unpick_requested = pyqtSignal()
    faces_wanted = pyqtSignal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self._faces: list[Detection] = []
        self._faces_for = -1  # the frame index the faces were found in
        self._hover: int | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(320, 180)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._mode: ViewMode = "side_by_side"
        self._frame: PreviewFrame | None = None
        self._badge = ""
        self._placeholder = "Press Start (Ctrl+Return). No camera needed: the test pattern is under Input."
        self._scaled: list[tuple[QRect, ImageBGR | None, str]] = []
        self._scaled_for: QSize | None = None
        # The newest original seen: shown when a frame's own copy is gone (evicted during a
        # stall), since the processed frame in its place carried the swap and the label.
        self._last_original: ImageBGR | None = None
        self.frames_shown = 0

    @property
    def mode(self) -> ViewMode:
        return self._mode

    @property
    def last_frame(self) -> PreviewFrame | None:
        """The frame on screen (None before the first)."""
        return self._frame

    @property
    def badge(self) -> str:
        return self._badge

    def set_mode(self, mode: ViewMode) -> None:
        self._mode = mode
        self._invalidate()

    def set_badge(self, text: str) -> None:
        if text != self._badge:
            self._badge = text
            self.update()

    def show_frame(self, frame: PreviewFrame) -> None:
        self._frame = frame
        if frame.original is not None:
            self._last_original = frame.original
        self.frames_shown += 1
        self._invalidate()

    def clear(self) -> None:
        self._frame = None
        self._last_original = None
        self.set_faces(-1, [])
        self._invalidate()

    # ----------------------------------------------------------------------------- picking faces

    @property
    def hovered(self) -> Detection | None:
        """The face under the mouse (outlined brighter), or None."""
        return None if self._hover is None else self._faces[self._hover]

    def pick_picture(self) -> ImageBGR | None:
        """The picture a pick embeds: the original (never the output, which carries the swap)."""
        frame = self._frame
        if frame is None:
            return None
        return frame.original if frame.original is not None else self._last_original

    def set_faces(self, index: int, faces: list[Detection]) -> None:
        self._faces, self._faces_for, self._hover = list(faces), index, None
        self.update()

    def frame_point(self, x: float, y: float) -> tuple[float, float] | None:
        """Widget coordinates -> picture pixels, in whichever pane they fall (None: outside)."""
        frame = self._frame
        if frame is None:
            return None
        h, w = frame.output.shape[:2]
        for rect, _, _ in self._layout():
            if rect.contains(int(x), int(y)) and rect.width() > 0 and rect.height() > 0:
                return (x - rect.x()) * w / rect.width(), (y - rect.y()) * h / rect.height()
        return None

    def _face_at(self, x: float, y: float) -> int | None:
        point = self.frame_point(x, y)
        if point is None:
            return None
        px, py = point
        inside = [
            i for i, d in enumerate(self._faces) if d.box[0] <= px <= d.box[2] and d.box[1] <= py <= d.box[3]
        ]
        return min(inside, key=lambda i: float(self._faces[i].box[2] - self._faces[i].box[0]), default=None)

    def mouseMoveEvent(self, event: QMouseEvent | None) -> None:
        if event is None or self._frame is None:
            return
        self.faces_wanted.emit()
        hover = self._face_at(event.position().x(), event.position().y())
        if hover != self._hover:
            self._hover = hover
            self.update()

    def mousePressEvent(self, event: QMouseEvent | None) -> None:
        if event is None or self._frame is None:
            return
        if event.button() == Qt.MouseButton.RightButton:
            self.unpick_requested.emit()
            return
        if event.button() != Qt.MouseButton.LeftButton:
            return
        at = self._face_at(event.position().x(), event.position().y())
        picture = self.pick_picture()
        if at is not None and picture is not None:
            self.face_clicked.emit(picture, self._faces[at].kps.copy())

    def _draw_faces(self, painter: QPainter, panes: list[tuple[QRect, ImageBGR | None, str]]) -> None:
        frame = self._frame
        if frame is None or not self._faces:
            return
        h, w = frame.output.shape[:2]
        for rect, _, _ in panes:
            sx, sy = rect.width() / w, rect.height() / h
            for i, face in enumerate(self._faces):
                hovered = i == self._hover
                pen = QPen(QColor(80, 200, 255) if hovered else QColor(255, 255, 255, 90))
                pen.setWidth(3 if hovered else 1)
                painter.setPen(pen)
                x1, y1, x2, y2 = (float(v) for v in face.box)
                painter.drawRect(
                    QRect(
                        int(rect.x() + x1 * sx),
                        int(rect.y() + y1 * sy),
                        int((x2 - x1) * sx),
                        int((y2 - y1) * sy),
                    )
                )

    def panes(self) -> list[tuple[str, ImageBGR | None]]:
        """What is on screen: (title, picture) per pane; None is a pane still waiting for its picture."""
        return [(title, image) for image, title in self._panes()]

    def sizeHint(self) -> QSize:
        return QSize(960, 540)

    def _invalidate(self) -> None:
        self._scaled_for = None
        self.update()

    def _panes(self) -> list[tuple[ImageBGR | None, str]]:
        frame = self._frame
        if frame is None:
            return []
        if self._mode == "swapped":
            return [(frame.output, "")]
        # Never the output in the original's place: it carries the swap and the disclosure label.
        original = frame.original if frame.original is not None else self._last_original
        if self._mode == "original":
            return [(original, "")]
        return [(original, "Original"), (frame.output, "Output")]

    def _layout(self) -> list[tuple[QRect, ImageBGR | None, str]]:
        """Scale each pane into its box with OpenCV (fast, off the paint engine), once per size/frame."""
        if self._scaled_for == self.size():
            return self._scaled
        panes = self._panes()
        ratio = self.devicePixelRatioF()
        out: list[tuple[QRect, ImageBGR | None, str]] = []
        frame = self._frame
        if panes and frame is not None:
            gap = 6 if len(panes) > 1 else 0
            pane_w = (self.width() - gap * (len(panes) - 1)) // len(panes)
            for i, (image, title) in enumerate(panes):
                box = QRect(i * (pane_w + gap), 0, pane_w, self.height())
                shape = (image if image is not None else frame.output).shape
                rect = _fit(QSize(shape[1], shape[0]), box)
                if image is None:
                    out.append((rect, None, title))
                    continue
                w, h = max(int(rect.width() * ratio), 1), max(int(rect.height() * ratio), 1)
                shrink = w < image.shape[1]
                scaled = cv2.resize(
                    image, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
                )
                out.append((rect, np.ascontiguousarray(scaled), title))
        self._scaled, self._scaled_for = out, self.size()
        return out

    def paintEvent(self, event: QPaintEvent | None) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(18, 18, 20))
        panes = self._layout()
        if not panes:
            painter.setPen(QColor(170, 170, 170))
            flags = int(Qt.AlignmentFlag.AlignCenter) | int(Qt.TextFlag.TextWordWrap)
            painter.drawText(self.rect().adjusted(12, 0, -12, 0), flags, self._placeholder)
        for rect, image, title in panes:
            if image is None:
                painter.fillRect(rect, QColor(40, 40, 44))
                painter.setPen(QColor(170, 170, 170))
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, "Waiting for the input picture…")
            else:
                painter.drawImage(rect, _qimage(image))
            if title:
                self._draw_tag(painter, rect.topLeft().x() + 8, rect.topLeft().y() + 8, title)
        self._draw_faces(painter, panes)
        if self._badge:
            self._draw_tag(painter, 8, self.height() - 32, self._badge, QColor(150, 90, 0, 220))
        painter.end()

    def _draw_tag(self, painter: QPainter, x: int, y: int, text: str, bg: QColor | None = None) -> None:
        font = QFont(self.font())
        font.setBold(True)
        painter.setFont(font)
        metrics = painter.fontMetrics()
        rect = QRect(x, y, metrics.horizontalAdvance(text) + 14, metrics.height() + 8)
        painter.fillRect(rect, bg or QColor(0, 0, 0, 160))
        painter.setPen(QColor(255, 255, 255))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
