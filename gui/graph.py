"""A small rolling graph of output fps and glass-to-glass latency (QPainter only)."""

from __future__ import annotations

from collections import deque

from PyQt6.QtCore import QPointF, QRectF, QSize, Qt
from PyQt6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPen, QPolygonF
from PyQt6.QtWidgets import QSizePolicy, QWidget

FPS_COLOUR = QColor(80, 200, 120)
LATENCY_COLOUR = QColor(240, 170, 60)


class FpsLatencyGraph(QWidget):
    """The last `capacity` samples of fps (left scale) and latency p50 in ms (right scale)."""

    def __init__(self, capacity: int = 120, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fps: deque[float] = deque(maxlen=capacity)
        self._latency: deque[float] = deque(maxlen=capacity)
        self._capacity = capacity
        self.setMinimumHeight(70)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip(
            "Output fps (green, left scale) and glass-to-glass latency p50 (orange, right scale),"
            " last 30 s.\n"
            "The top line's values are written at its ends; the grid lines are quarters of them."
        )

    def sizeHint(self) -> QSize:
        return QSize(480, 80)

    def add_sample(self, fps: float, latency_ms: float) -> None:
        self._fps.append(max(fps, 0.0))
        self._latency.append(max(latency_ms, 0.0))
        self.update()

    def clear(self) -> None:
        self._fps.clear()
        self._latency.clear()
        self.update()

    @property
    def samples(self) -> int:
        return len(self._fps)

    def scales(self) -> tuple[float, float]:
        """The values at the top line: (fps, latency ms); the grid lines are quarters of them."""
        fps_top = max(30.0, max(self._fps, default=0.0) * 1.15)
        lat_top = max(100.0, max(self._latency, default=0.0) * 1.15)
        return fps_top, lat_top

    def scale_labels(self) -> tuple[str, str]:
        """The scale written on the graph: top-line values, fps on the left, ms on the right."""
        fps_top, lat_top = self.scales()
        return f"{fps_top:.0f} fps", f"{lat_top:.0f} ms"

    def paintEvent(self, event: QPaintEvent | None) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), QColor(24, 24, 28))
        plot = QRectF(self.rect()).adjusted(4, 16, -4, -4)
        painter.setPen(QPen(QColor(60, 60, 66), 1))
        for i in range(1, 4):
            y = plot.top() + plot.height() * i / 4
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
        fps_top, lat_top = self.scales()
        fps_scale, lat_scale = self.scale_labels()
        small = QFont(self.font())
        small.setPointSizeF(max(small.pointSizeF() * 0.8, 6.0))
        painter.setFont(small)
        painter.setPen(QColor(130, 130, 140))
        top = QRectF(plot.left() + 2, plot.top(), 120, 12)
        painter.drawText(top, Qt.AlignmentFlag.AlignLeft, fps_scale)
        painter.drawText(top.translated(plot.width() - 124, 0), Qt.AlignmentFlag.AlignRight, lat_scale)
        painter.drawText(QRectF(plot.left() + 2, plot.bottom() - 12, 40, 12), Qt.AlignmentFlag.AlignLeft, "0")
        painter.setFont(self.font())
        self._line(painter, plot, self._fps, fps_top, FPS_COLOUR)
        self._line(painter, plot, self._latency, lat_top, LATENCY_COLOUR)
        painter.setPen(FPS_COLOUR)
        fps_now = f"{self._fps[-1]:.1f}" if self._fps else "–"
        fps_text = f"{fps_now} fps"
        painter.drawText(QRectF(6, 0, 200, 16), Qt.AlignmentFlag.AlignLeft, fps_text)
        painter.setPen(LATENCY_COLOUR)
        lat_now = f"{self._latency[-1]:.0f}" if self._latency else "–"
        painter.drawText(
            QRectF(self.width() - 246, 0, 240, 16),
            Qt.AlignmentFlag.AlignRight,
            f"latency {lat_now} ms",
        )
        painter.end()

    def _line(
        self, painter: QPainter, plot: QRectF, values: deque[float], top: float, colour: QColor
    ) -> None:
        if len(values) < 2:
            return
        step = plot.width() / max(self._capacity - 1, 1)
        x0 = plot.right() - step * (len(values) - 1)
        bottom, height = plot.bottom(), plot.height()
        points = [QPointF(x0 + i * step, bottom - height * min(v / top, 1.0)) for i, v in enumerate(values)]
        painter.setPen(QPen(colour, 1.6))
        painter.drawPolyline(QPolygonF(points))
