"""Input widgets that leave the mouse wheel to the page unless the user has clicked into them.

Qt's combo and spin boxes take every wheel event under the pointer: scrolling a settings page
changed the swap model, the detector and the camera size on the way past (each restarting or
reloading a running session, then saved as the user's choice). These take the wheel only with
focus; otherwise the event goes on to the scroll area behind them.
"""

from __future__ import annotations

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QMouseEvent, QWheelEvent
from PyQt6.QtWidgets import QComboBox, QDoubleSpinBox, QPushButton, QSpinBox, QWidget


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
