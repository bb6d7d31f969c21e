"""Non-modal messages at the top of the window: errors, warnings and notes, never a blocking dialog.

A repeated message (e.g. the same per-frame warning thirty times a second) is shown once with a count.
Beyond MAX_LINES lines of text the banners scroll: word-wrapped, they gave the window no minimum
height, so in a small window the preview and graph slid under them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from PyQt6.QtCore import Qt, QTimer
from PyQt6.QtGui import QResizeEvent
from PyQt6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

Level = Literal["info", "warning", "error"]

_STYLE: dict[Level, str] = {
    "info": "background:#1f3a5a; color:#e8f0ff; border:1px solid #2f5a8a;",
    "warning": "background:#5a4410; color:#fff3d6; border:1px solid #8a6a1a;",
    "error": "background:#5a1f1f; color:#ffe3e3; border:1px solid #8a2f2f;",
}
_ICON: dict[Level, str] = {"info": "ℹ", "warning": "⚠", "error": "✖"}
MAX_LINES = 8  # of banner text shown at once; more scrolls


@dataclass
class _Entry:
    level: Level
    text: str
    count: int
    row: QFrame
    label: QLabel


class MessageBar(QWidget):
    """A stack of dismissible one-line banners, newest on top, at most `limit` at once."""

    def __init__(self, limit: int = 4, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._limit = limit
        self._entries: list[_Entry] = []
        self._rows = QWidget()
        layout = QVBoxLayout(self._rows)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self._layout = layout
        self._scroll = QScrollArea(self)
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._scroll.setWidget(self._rows)
        viewport = self._scroll.viewport()
        if viewport is not None:  # the window's own background, not the scroll area's
            viewport.setAutoFillBackground(False)
        self._rows.setAutoFillBackground(False)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self._scroll)
        self.setVisible(False)

    def show_message(self, level: Level, text: str) -> None:
        for entry in self._entries:
            if entry.text == text and entry.level == level:
                entry.count += 1
                entry.label.setText(self._format(entry.level, text, entry.count))
                self._fit()
                return
        row = QFrame(self)
        row.setStyleSheet(f"QFrame {{ {_STYLE[level]} border-radius:4px; }} QLabel {{ border:none; }}")
        hbox = QHBoxLayout(row)
        hbox.setContentsMargins(8, 4, 4, 4)
        label = QLabel(self._format(level, text, 1), row)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton(row)
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        hbox.addWidget(label, 1)
        hbox.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        entry = _Entry(level, text, 1, row, label)
        close.clicked.connect(lambda: self._remove(entry))
        self._entries.insert(0, entry)
        self._layout.insertWidget(0, row)
        while len(self._entries) > self._limit:
            self._remove(self._entries[-1])
        self.setVisible(True)
        self._fit()

    def dismiss(self, level: Level, text: str) -> None:
        """Take a message down once it no longer applies (the error of a Start that failed before)."""
        for entry in list(self._entries):
            if entry.level == level and entry.text == text:
                self._remove(entry)

    def clear(self) -> None:
        for entry in list(self._entries):
            self._remove(entry)

    def texts(self) -> list[str]:
        """The messages shown, newest first (for tests and the screenshot script)."""
        return [e.text for e in self._entries]

    def _remove(self, entry: _Entry) -> None:
        if entry in self._entries:
            self._entries.remove(entry)
            self._layout.removeWidget(entry.row)
            entry.row.deleteLater()
        self.setVisible(bool(self._entries))
        self._fit()

    def resizeEvent(self, a0: QResizeEvent | None) -> None:
        super().resizeEvent(a0)
        self._fit()  # narrower: the banners wrap to more lines

    def _fit(self) -> None:
        """As tall as the banners at this width, up to MAX_LINES lines: a fixed height the window's
        minimum size includes (a word-wrapped label's height was not). Once now and once more when
        the event loop has laid a new row out: measured at once, a new banner's row still had no
        height (each banner hid the one before it)."""
        self._fit_now()
        QTimer.singleShot(0, self._fit_now)

    def _fit_now(self) -> None:
        viewport = self._scroll.viewport()
        width = viewport.width() if viewport is not None and self.isVisible() else self.width()
        needed = self._rows.heightForWidth(width)
        if needed < 0:
            needed = self._rows.sizeHint().height()
        cap = self.fontMetrics().lineSpacing() * MAX_LINES
        # On the scroll area, which the bar's layout follows: fixed on the bar, the scroll area
        # inside kept a stale height (a blank strip under a cut banner at the minimum size).
        self._scroll.setFixedHeight(min(needed, cap))

    @staticmethod
    def _format(level: Level, text: str, count: int) -> str:
        suffix = f"  (×{count})" if count > 1 else ""
        return f"{_ICON[level]}  {text}{suffix}"
