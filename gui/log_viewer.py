"""The log in a window of the panel's own, for a desktop with no application to open it (a bare X
session, a remote desktop without xdg-open): Log showed nothing at all there."""

from __future__ import annotations

from pathlib import Path

from PyQt6.QtGui import QFontDatabase, QGuiApplication
from PyQt6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

TAIL_BYTES = 200_000  # the end of the log: what a user looks at after something went wrong


class LogViewer(QDialog):
    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"FaceCast log — {path}")
        self.path = path
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        where = QLabel(f"No application here opens the log; it is {path}")
        where.setWordWrap(True)
        copy = QPushButton("Copy path")
        copy.clicked.connect(self._copy_path)
        reload = QPushButton("Reload")
        reload.clicked.connect(self.reload)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addWidget(copy)
        buttons.addWidget(reload)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(where)
        layout.addWidget(self.text, 1)
        layout.addLayout(buttons)
        self.resize(900, 500)
        self.reload()

    def reload(self) -> None:
        try:
            with self.path.open("rb") as log:
                log.seek(max(0, self.path.stat().st_size - TAIL_BYTES))
                text = log.read().decode("utf-8", errors="replace")
        except OSError as exc:
            text = f"The log cannot be read: {exc.strerror or exc}."
        self.text.setPlainText(text)
        bar = self.text.verticalScrollBar()
        if bar is not None:
            bar.setValue(bar.maximum())  # the newest lines

    def _copy_path(self) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None:
            clipboard.setText(str(self.path))
