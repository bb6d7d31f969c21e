"""Input widgets that leave the mouse wheel to the page unless the user has clicked into them.

Qt's combo and spin boxes take every wheel event under the pointer: scrolling a settings page
changed the swap model, the detector and the camera size on the way past (each restarting or
reloading a running session, then saved as the user's choice). These take the wheel only with
focus; otherwise the event goes on to the scroll area behind them.
"""

from __future__ import annotations

from PyQt6.QtCore import QEvent, QSize, Qt
from PyQt6.QtGui import QMouseEvent, QResizeEvent, QWheelEvent
from PyQt6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QWidget,
)


class _WheelWhenFocused:
    """Mixin for a Qt input widget: focus by click or Tab only, and the wheel only with focus."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)  # type: ignore[call-arg]  # the Qt class after this mixin
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # type: ignore[attr-defined]

    def wheelEvent(self, e: QWheelEvent | None) -> None:
        if self.hasFocus():  # type: ignore[attr-defined]
            super().wheelEvent(e)  # type: ignore[misc]
        elif e is not None:
            e.ignore()  # passed on to the scroll area


class ComboBox(_WheelWhenFocused, QComboBox):
    pass


class SpinBox(_WheelWhenFocused, QSpinBox):
    pass


class DoubleSpinBox(_WheelWhenFocused, QDoubleSpinBox):
    pass


class ClickOnceButton(QPushButton):
    """A button for which a double-click is one click. Start's second click stopped the run it had
    just started (Start looked broken, and the call app saw the virtual camera blink)."""

    def mouseDoubleClickEvent(self, e: QMouseEvent | None) -> None:
        if e is not None:
            e.accept()  # the second press of a double-click: swallowed, so no second `clicked`


class ElidedLabel(QLabel):
    """One line elided in the middle to whatever width its layout gives it, again at every resize;
    the whole text is the tooltip when it does not fit. (The status bar's note was elided once, then
    the live numbers beside it widened and cut it a second time, hard, under the fps figure.)"""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        # Ignored: the text never asks for room, it takes what is left and is elided to it.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._elide()

    def resizeEvent(self, a0: QResizeEvent | None) -> None:
        super().resizeEvent(a0)
        self._elide()

    def _elide(self) -> None:
        room = max(self.contentsRect().width(), 0)
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle, room)
        self.setText(shown)
        self.setToolTip(self._full if shown != self._full else "")


class PageScrollArea(QScrollArea):
    """A tab page that scrolls up and down only: never narrower than its page's minimum (plus the
    scroll bar), so a small window does not hide a row's buttons behind a sideways scroll. Follows
    the page's minimum when it changes (a help panel shown)."""

    def __init__(self, page: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setWidget(page)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        page, bar = self.widget(), self.verticalScrollBar()
        if page is None:
            return hint
        extra = 2 * self.frameWidth() + (bar.sizeHint().width() if bar is not None else 0)
        return QSize(page.minimumSizeHint().width() + extra, hint.height())

    def event(self, e: QEvent | None) -> bool:
        if e is not None and e.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the page's minimum may have changed: the tabs' follows
        return super().event(e)
