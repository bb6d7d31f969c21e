"""First run: the models' licences and the user's confirmation that they have consent."""

from __future__ import annotations

from PyQt6.QtCore import Qt
from PyQt6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from realtime.api import CONSENT_TEXT, licence_lines

__all__ = ["CONSENT_TEXT", "ConsentDialog", "licence_lines"]


class ConsentDialog(QDialog):
    """Continue is enabled only once the consent box is ticked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Before you start — FaceCast")
        self.setMinimumWidth(560)
        intro = QLabel(
            "FaceCast replaces a face in live video with the face from a photo you choose. "
            "Used without consent it can deceive and harm people."
        )
        intro.setWordWrap(True)
        listed = "\n• ".join(licence_lines())
        licences = QLabel(
            "The face models' licences (most allow non-commercial research only; each is shown "
            f"again before its download):\n• {listed}"
        )
        licences.setWordWrap(True)
        licences.setTextFormat(Qt.TextFormat.PlainText)
        licences.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        disclosure = QLabel(
            'The output is marked "AI-modified" by default (Output tab). Tell the people who see it.'
        )
        disclosure.setWordWrap(True)
        self.consent_check = QCheckBox(CONSENT_TEXT)
        self.consent_check.setStyleSheet("font-weight:bold;")
        buttons = QDialogButtonBox()
        self.continue_button = buttons.addButton("Continue", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton("Quit", QDialogButtonBox.ButtonRole.RejectRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        assert self.continue_button is not None
        self.continue_button.setEnabled(False)
        self.consent_check.toggled.connect(self.continue_button.setEnabled)
        layout = QVBoxLayout(self)
        for widget in (intro, licences, disclosure, self.consent_check):
            layout.addWidget(widget)
        layout.addWidget(buttons)
