"""Input choice: a camera (by name, with the modes it really delivers once probed), a video file, or
the built-in test pattern. Listing and probing cameras can take seconds, so both run off the GUI thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

from PyQt6.QtCore import pyqtSignal
from PyQt6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from gui.background import run_in_background
from gui.config import INPUT_FPS_RANGE, InputConfig, InputKind
from gui.widgets import ComboBox, DoubleSpinBox
from realtime.api import CameraInfo, CameraMode

COMMON_SIZES: tuple[tuple[int, int], ...] = ((640, 480), (1280, 720), (1920, 1080))
VIDEO_FILTER = "Videos (*.mp4 *.mkv *.mov *.avi *.webm *.m4v);;All files (*)"


def camera_label(info: CameraInfo) -> str:
    """A camera's name as the user knows it; the index when the OS gives no name."""
    if info.path:
        return f"{info.name} ({info.path})"
    return info.name if info.name else f"Camera {info.index}"


class InputPanel(QWidget):
    """Emits `changed` whenever the input the next Start would open changes."""

    changed = pyqtSignal()

    def __init__(
        self,
        list_cameras: Callable[[], Sequence[CameraInfo]],
        probe_modes: Callable[[int], tuple[CameraMode, ...]],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._list_cameras = list_cameras
        self._probe_modes = probe_modes
        self._config = InputConfig()
        self._cameras: list[CameraInfo] = []
        self._modes: dict[int, tuple[CameraMode, ...]] = {}

        self.pattern_radio = QRadioButton("Test pattern (no camera needed)")
        self.camera_radio = QRadioButton("Camera")
        self.video_radio = QRadioButton("Video file (loops)")
        self._kinds = QButtonGroup(self)
        for button in (self.pattern_radio, self.camera_radio, self.video_radio):
            self._kinds.addButton(button)
        self._kinds.buttonToggled.connect(self._on_kind)

        self.camera_combo = ComboBox()
        self.camera_combo.setPlaceholderText("Looking for cameras…")
        # `activated`: every pick by the user, also of the item already shown (the only camera is
        # shown from the start, and picking it must still switch the input to it).
        self.camera_combo.activated.connect(self._on_camera)
        self._capturing = False
        self.refresh_button = refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_cameras)
        self.probe_button = QPushButton("Probe modes")
        self.probe_button.setToolTip("Open the camera briefly and ask which sizes and rates it delivers")
        self.probe_button.clicked.connect(self.probe_current_camera)
        camera_row = QHBoxLayout()
        camera_row.addWidget(self.camera_combo, 1)
        camera_row.addWidget(refresh)
        camera_row.addWidget(self.probe_button)
        self.camera_status = QLabel("")
        self.camera_status.setWordWrap(True)
        self.camera_status.setStyleSheet("color:#999;")

        self.video_edit = QLineEdit()
        self.video_edit.setPlaceholderText("Choose a video file…")
        self.video_edit.editingFinished.connect(self._on_video_path)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_video)
        video_row = QHBoxLayout()
        video_row.addWidget(self.video_edit, 1)
        video_row.addWidget(browse)

        self.mode_combo = ComboBox()
        self.mode_combo.currentIndexChanged.connect(self._on_mode)
        self.fps_spin = DoubleSpinBox()
        self.fps_spin.setRange(*INPUT_FPS_RANGE)
        self.fps_spin.setDecimals(0)
        self.fps_spin.setSuffix(" fps")
        # Only a finished edit counts: typing "15" would otherwise restart the run at 1 fps first.
        self.fps_spin.setKeyboardTracking(False)
        self.fps_spin.valueChanged.connect(self._on_fps)
        mode_form = QFormLayout()
        mode_form.addRow("Size", self.mode_combo)
        mode_form.addRow("Rate", self.fps_spin)
        mode_note = QLabel("A camera may deliver another size; the preview shows what it really sends.")
        mode_note.setWordWrap(True)
        mode_note.setStyleSheet("color:#999;")

        source_box = QGroupBox("Source")
        source_layout = QVBoxLayout(source_box)
        source_layout.addWidget(self.pattern_radio)
        source_layout.addWidget(self.camera_radio)
        source_layout.addLayout(camera_row)
        source_layout.addWidget(self.camera_status)
        source_layout.addWidget(self.video_radio)
        source_layout.addLayout(video_row)
        mode_box = QGroupBox("Camera / test pattern mode")
        mode_layout = QVBoxLayout(mode_box)
        mode_layout.addLayout(mode_form)
        mode_layout.addWidget(mode_note)
        layout = QVBoxLayout(self)
        layout.addWidget(source_box)
        layout.addWidget(mode_box)
        layout.addStretch(1)
        self.set_config(self._config)

    # ---- config ----------------------------------------------------------------------------------------

    def config(self) -> InputConfig:
        return self._config

    def set_config(self, config: InputConfig) -> None:
        self._config = config
        radio = {"pattern": self.pattern_radio, "camera": self.camera_radio, "video": self.video_radio}
        for widget in (self._kinds, self.video_edit, self.fps_spin):
            widget.blockSignals(True)
        radio[config.kind].setChecked(True)
        self.video_edit.setText(config.video_path)
        self.fps_spin.setValue(config.fps)
        for widget in (self._kinds, self.video_edit, self.fps_spin):
            widget.blockSignals(False)
        self._select_camera(config.camera_index)
        self._fill_modes()

    def _update(self, **changes: object) -> None:
        new = replace(self._config, **changes)  # type: ignore[arg-type]
        if new != self._config:
            self._config = new
            self.changed.emit()

    # ---- cameras ---------------------------------------------------------------------------------------

    def set_capturing(self, capturing: bool) -> None:
        """Refresh and Probe open cameras: not while a run captures (a second open of the live
        camera fails, or breaks the running stream, with some drivers)."""
        self._capturing = capturing
        for button in (self.refresh_button, self.probe_button):
            button.setEnabled(not capturing)
        tip = "Stop first: this opens cameras, which would disturb the running capture" if capturing else ""
        self.refresh_button.setToolTip(tip)
        self.probe_button.setToolTip(
            tip or "Open the camera briefly and ask which sizes and rates it delivers"
        )

    def refresh_cameras(self) -> None:
        self.camera_status.setText("Looking for cameras…")
        run_in_background(self._list_cameras, self._on_cameras, self, "list-cameras")

    def probe_current_camera(self) -> None:
        index = self._config.camera_index
        self.probe_button.setEnabled(False)
        self.camera_status.setText(f"Asking camera {index} which modes it delivers…")

        def done(modes: tuple[CameraMode, ...] | None, error: Exception | None) -> None:
            self.probe_button.setEnabled(not self._capturing)
            if error is not None or modes is None:
                self.camera_status.setText(f"Could not probe camera {index}: {error}")
                return
            self._modes[index] = tuple(modes)
            shown = ", ".join(str(m) for m in modes) or "none reported"
            self.camera_status.setText(f"Camera {index} delivers: {shown}")
            self._fill_modes()

        run_in_background(lambda: self._probe_modes(index), done, self, "probe-modes")

    def _on_cameras(self, cameras: Sequence[CameraInfo] | None, error: Exception | None) -> None:
        if error is not None or cameras is None:
            self.camera_status.setText(f"Could not list cameras: {error}")
            return
        self._cameras = list(cameras)
        for info in self._cameras:
            if info.modes:
                self._modes[info.index] = info.modes
        self.camera_combo.blockSignals(True)
        self.camera_combo.clear()
        for info in self._cameras:
            self.camera_combo.addItem(camera_label(info), info.index)
        self.camera_combo.blockSignals(False)
        if not self._cameras:
            self.camera_combo.setPlaceholderText("No camera found")
            self.camera_status.setText("No camera found. The test pattern works without one.")
        else:
            self.camera_status.setText(f"{len(self._cameras)} camera(s) found.")
            if self.camera_combo.findData(self._config.camera_index) < 0:
                # The camera chosen last time is not connected now: say so, not "Looking…".
                self.camera_combo.setPlaceholderText(
                    f"Camera {self._config.camera_index} (saved) is not connected: choose one"
                )
        self._select_camera(self._config.camera_index)

    def _select_camera(self, index: int) -> None:
        position = self.camera_combo.findData(index)
        self.camera_combo.blockSignals(True)
        self.camera_combo.setCurrentIndex(position)
        self.camera_combo.blockSignals(False)

    def _on_camera(self, position: int) -> None:
        data = self.camera_combo.itemData(position)
        if isinstance(data, int):
            # Picking a camera means using it (as Browse… does for a video).
            self._update(camera_index=data, kind="camera")
            self.camera_radio.setChecked(True)
            self._fill_modes()

    # ---- modes -----------------------------------------------------------------------------------------

    def _fill_modes(self) -> None:
        """The probed modes of the chosen camera where known, else the common sizes."""
        known = self._modes.get(self._config.camera_index, ()) if self._config.kind == "camera" else ()
        # A probed mode carries its rate (1280x720@30 and @60 are two modes); a common size does not.
        modes: list[tuple[int, int, float | None, str]] = [(m.width, m.height, m.fps, str(m)) for m in known]
        if not modes:
            modes = [(w, h, None, f"{w}x{h}") for w, h in COMMON_SIZES]
        size, fps = (self._config.width, self._config.height), self._config.fps

        def matches(mode: tuple[int, int, float | None, str]) -> bool:
            return (mode[0], mode[1]) == size and (mode[2] is None or mode[2] == fps)

        if not any(matches(mode) for mode in modes):
            modes.append((size[0], size[1], None, f"{size[0]}x{size[1]}"))
        self.mode_combo.blockSignals(True)
        self.mode_combo.clear()
        for w, h, rate, text in modes:
            self.mode_combo.addItem(text, (w, h, rate))
        self.mode_combo.setCurrentIndex(next(i for i, mode in enumerate(modes) if matches(mode)))
        self.mode_combo.blockSignals(False)

    def _on_mode(self, position: int) -> None:
        data = self.mode_combo.itemData(position)
        if isinstance(data, tuple):
            width, height, rate = cast(tuple[int, int, float | None], data)
            if rate:
                self.fps_spin.blockSignals(True)
                self.fps_spin.setValue(rate)
                self.fps_spin.blockSignals(False)
                self._update(width=width, height=height, fps=float(rate))
            else:
                self._update(width=width, height=height)

    def _on_fps(self, value: float) -> None:
        self._update(fps=float(value))

    # ---- kind / video ----------------------------------------------------------------------------------

    def _on_kind(self) -> None:
        kinds: dict[QRadioButton, InputKind] = {
            self.pattern_radio: "pattern",
            self.camera_radio: "camera",
            self.video_radio: "video",
        }
        for button, kind in kinds.items():
            if button.isChecked():
                self._update(kind=kind)
        self._fill_modes()

    def _on_video_path(self) -> None:
        path = self.video_edit.text().strip()
        if path and path != self._config.video_path:
            # A path typed in means using it (as Browse… does).
            self._update(video_path=path, kind="video")
            self.video_radio.setChecked(True)
        else:
            self._update(video_path=path)

    def _browse_video(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Choose a video", self._config.video_path, VIDEO_FILTER)
        if name:
            self.video_edit.setText(name)
            self._update(video_path=name, kind="video")
            self.video_radio.setChecked(True)
