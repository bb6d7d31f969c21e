"""Output choice: virtual camera (size, fps), recording, or preview only; the disclosure label; the
measured latency to set as the audio delay; and, when the driver is missing, how to install it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import cast

from PyQt6.QtCore import Qt, pyqtSignal
from PyQt6.QtGui import QGuiApplication
from PyQt6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gui.config import VCAM_FPS_RANGE, OutputConfig, default_record_path
from gui.widgets import ComboBox, DoubleSpinBox

VCAM_SIZES: tuple[tuple[int, int], ...] = ((640, 360), (640, 480), (1280, 720), (1920, 1080))


def first_command(text: str) -> str:
    """The first `backticked` command in a fix text ('' if none)."""
    match = re.search(r"`([^`]+)`", text)
    return match.group(1) if match else ""


class VcamHelpPanel(QFrame):
    """Says exactly how to install the virtual camera driver on this OS. Not a dialog."""

    retry_requested = pyqtSignal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("vcamHelp")
        self.setStyleSheet(
            "QFrame#vcamHelp { background:#3a2a10; border:1px solid #a07020; border-radius:6px; }"
            "QLabel { color:#ffe9c0; }"
        )
        title = QLabel("Virtual camera driver not found")
        title.setStyleSheet("font-weight:bold; font-size:13px;")
        self.fix_label = QLabel()
        self.fix_label.setWordWrap(True)
        self.fix_label.setTextFormat(Qt.TextFormat.PlainText)
        self.fix_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        note = QLabel("The preview and recording keep working meanwhile.")
        note.setStyleSheet("color:#d0b890;")
        self.copy_button = QPushButton("Copy command")
        self.copy_button.clicked.connect(self._copy)
        retry = QPushButton("Try again")
        retry.setToolTip("Restart the output once the driver is installed")
        retry.clicked.connect(self.retry_requested)
        dismiss = QPushButton("Dismiss")
        dismiss.clicked.connect(self.hide)
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addWidget(retry)
        buttons.addStretch(1)
        buttons.addWidget(dismiss)
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(self.fix_label)
        layout.addWidget(note)
        layout.addLayout(buttons)
        self.hide()

    def show_fix(self, fix: str) -> None:
        self.fix_label.setText(fix)
        self.copy_button.setVisible(bool(first_command(fix)))
        self.show()

    def _copy(self) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None:
            clipboard.setText(first_command(self.fix_label.text()))


class OutputPanel(QWidget):
    """Emits `changed` when the outputs change and `disclosure_changed(bool)` for the label."""

    changed = pyqtSignal()
    disclosure_changed = pyqtSignal(bool)
    open_folder_requested = pyqtSignal(object)  # Path of the folder holding the recording

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._config = OutputConfig()

        self.vcam_check = QCheckBox("Send to the virtual camera")
        self.vcam_check.toggled.connect(lambda on: self._update(vcam=on))
        self.vcam_size = ComboBox()
        self.vcam_size.currentIndexChanged.connect(self._on_size)
        self.vcam_fps = DoubleSpinBox()
        self.vcam_fps.setRange(*VCAM_FPS_RANGE)
        self.vcam_fps.setDecimals(0)
        self.vcam_fps.setSuffix(" fps")
        self.vcam_fps.setKeyboardTracking(False)  # a finished edit restarts the run, not each digit
        self.vcam_fps.valueChanged.connect(lambda v: self._update(vcam_fps=float(v)))
        vcam_form = QFormLayout()
        vcam_form.addRow("Size", self.vcam_size)
        vcam_form.addRow("Rate", self.vcam_fps)
        self.help_panel = VcamHelpPanel()
        self.vcam_state = QLabel("Virtual camera: not running")
        self.vcam_state.setWordWrap(True)
        self.vcam_state.setStyleSheet("color:#aaa;")
        vcam_box = QGroupBox("Virtual camera")
        vcam_layout = QVBoxLayout(vcam_box)
        vcam_layout.addWidget(self.vcam_check)
        vcam_layout.addLayout(vcam_form)
        vcam_layout.addWidget(self.vcam_state)
        vcam_layout.addWidget(self.help_panel)

        self.record_check = QCheckBox("Record to a file")
        self.record_check.toggled.connect(lambda on: self._update(record=on))
        self.record_edit = QLineEdit()
        self.record_edit.setPlaceholderText(str(default_record_path()))
        self.record_edit.editingFinished.connect(self._on_record_path)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        record_row = QHBoxLayout()
        record_row.addWidget(self.record_edit, 1)
        record_row.addWidget(browse)
        record_box = QGroupBox("Recording")
        record_layout = QVBoxLayout(record_box)
        record_layout.addWidget(self.record_check)
        record_layout.addLayout(record_row)
        self.take_label = QLabel("")
        self.take_label.setWordWrap(True)
        self.take_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_folder_button = QPushButton("Open folder")
        self.open_folder_button.setToolTip("Show the recording in the file manager")
        self.open_folder_button.clicked.connect(self._open_folder)
        self.open_folder_button.hide()
        take_row = QHBoxLayout()
        take_row.addWidget(self.take_label, 1)
        take_row.addWidget(self.open_folder_button, 0, Qt.AlignmentFlag.AlignTop)
        record_layout.addLayout(take_row)
        self._take: Path | None = None

        self.preview_only = QLabel("Preview only: nothing leaves this window.")
        self.preview_only.setStyleSheet("color:#999;")

        self.label_check = QCheckBox('Mark the output "AI-modified" (disclosure label)')
        self.label_check.setToolTip("Tell viewers the video is synthetic. Recommended, and on by default.")
        self.label_check.toggled.connect(self.disclosure_changed)

        self.latency_value = QLabel("Latency: – (start to measure)")
        self.latency_value.setStyleSheet("font-size:15px; font-weight:bold;")
        # Wrapped: unwrapped, its running text widened the tab and moved the divider at every Start.
        self.latency_value.setWordWrap(True)
        latency_hint = QLabel(
            "Set OBS's audio Sync Offset (Edit → Advanced Audio Properties) — or your call app's audio "
            "delay — to the suggested delay so speech matches the lips. It is the p99 latency: 99 frames "
            "in 100 arrive within it, so the sound is never ahead of the slow ones."
        )
        latency_hint.setWordWrap(True)
        latency_hint.setStyleSheet("color:#aaa;")
        latency_box = QGroupBox("Measured glass-to-glass latency")
        latency_layout = QVBoxLayout(latency_box)
        latency_layout.addWidget(self.latency_value)
        latency_layout.addWidget(latency_hint)

        layout = QVBoxLayout(self)
        layout.addWidget(vcam_box)
        layout.addWidget(record_box)
        layout.addWidget(self.preview_only)
        layout.addWidget(self.label_check)
        layout.addWidget(latency_box)
        layout.addStretch(1)
        self.set_config(self._config, disclosure_label=True)

    # ---- config ----------------------------------------------------------------------------------------

    def config(self) -> OutputConfig:
        return self._config

    def set_config(self, config: OutputConfig, disclosure_label: bool) -> None:
        self._config = config
        widgets = (self.vcam_check, self.vcam_size, self.vcam_fps, self.record_check, self.record_edit)
        for widget in (*widgets, self.label_check):
            widget.blockSignals(True)
        self.vcam_check.setChecked(config.vcam)
        self._fill_sizes()
        self.vcam_fps.setValue(config.vcam_fps)
        self.record_check.setChecked(config.record)
        self.record_edit.setText(config.record_path)
        self.label_check.setChecked(disclosure_label)
        for widget in (*widgets, self.label_check):
            widget.blockSignals(False)
        self._refresh()

    def set_latency(self, p50_ms: float | None, p99_ms: float | None = None) -> None:
        if p50_ms is None:
            self.latency_value.setText("Latency: – (start to measure)")
            return
        if p99_ms is None:
            self.latency_value.setText(f"Latency: {p50_ms:.0f} ms (p50)")
            return
        self.latency_value.setText(
            f"Suggested audio delay: {p99_ms:.0f} ms (latency p50 {p50_ms:.0f} ms, p99 {p99_ms:.0f} ms)"
        )

    def set_vcam_state(self, text: str) -> None:
        self.vcam_state.setText(text)

    def set_take(self, path: Path | None, running: bool) -> None:
        """The recording's file: being written while running, the last take after Stop."""
        if path is None:
            self.take_label.setText("")
            self.open_folder_button.hide()
            self._take = None
            return
        self._take = path
        self.take_label.setText(f"{'Recording to' if running else 'Last recording'}: {path}")
        self.open_folder_button.show()

    def _open_folder(self) -> None:
        if self._take is not None:
            self.open_folder_requested.emit(self._take.parent)

    def show_vcam_help(self, fix: str) -> None:
        self.help_panel.show_fix(fix)

    def _update(self, **changes: object) -> None:
        new = replace(self._config, **changes)  # type: ignore[arg-type]
        if new != self._config:
            self._config = new
            self._refresh()
            self.changed.emit()

    def _refresh(self) -> None:
        self.vcam_size.setEnabled(self._config.vcam)
        self.vcam_fps.setEnabled(self._config.vcam)
        self.record_edit.setEnabled(self._config.record)
        self.preview_only.setVisible(not (self._config.vcam or self._config.record))
        if not self._config.vcam:
            self.help_panel.hide()  # its driver advice is about an output no longer asked for

    def _fill_sizes(self) -> None:
        sizes = list(VCAM_SIZES)
        wanted = (self._config.vcam_width, self._config.vcam_height)
        if wanted not in sizes:
            sizes.append(wanted)
        self.vcam_size.clear()
        for w, h in sizes:
            self.vcam_size.addItem(f"{w}x{h}", (w, h))
        self.vcam_size.setCurrentIndex(sizes.index(wanted))

    def _on_size(self, position: int) -> None:
        data = self.vcam_size.itemData(position)
        if isinstance(data, tuple):
            width, height = cast(tuple[int, int], data)
            self._update(vcam_width=width, vcam_height=height)

    def _on_record_path(self) -> None:
        self._update(record_path=self.record_edit.text().strip())

    def _browse(self) -> None:
        start = self._config.record_path or str(default_record_path())
        name, _ = QFileDialog.getSaveFileName(self, "Record to", start, "Video (*.mp4 *.mkv *.mov)")
        if name:
            self.record_edit.setText(name)
            self._update(record_path=name, record=True)
