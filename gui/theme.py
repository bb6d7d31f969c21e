"""A dark Fusion theme: the preview stays the brightest thing on screen (as in DeepFaceLive/OBS)."""

from __future__ import annotations

from PyQt6.QtGui import QColor, QPalette
from PyQt6.QtWidgets import QApplication

_ROLES: tuple[tuple[QPalette.ColorRole, str], ...] = (
    (QPalette.ColorRole.Window, "#2b2b30"),
    (QPalette.ColorRole.WindowText, "#e6e6e6"),
    (QPalette.ColorRole.Base, "#1f1f23"),
    (QPalette.ColorRole.AlternateBase, "#2b2b30"),
    (QPalette.ColorRole.ToolTipBase, "#3a3a40"),
    (QPalette.ColorRole.ToolTipText, "#f0f0f0"),
    (QPalette.ColorRole.Text, "#e6e6e6"),
    (QPalette.ColorRole.Button, "#36363c"),
    (QPalette.ColorRole.ButtonText, "#e6e6e6"),
    (QPalette.ColorRole.BrightText, "#ff6060"),
    (QPalette.ColorRole.Highlight, "#3d8bfd"),
    (QPalette.ColorRole.HighlightedText, "#ffffff"),
    (QPalette.ColorRole.Link, "#6ea8fe"),
    (QPalette.ColorRole.PlaceholderText, "#8a8a90"),
)


def apply_dark_theme(app: QApplication) -> None:
    app.setStyle("Fusion")
    palette = QPalette()
    for role, colour in _ROLES:
        palette.setColor(role, QColor(colour))
    disabled = QColor("#77777d")
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    app.setPalette(palette)
