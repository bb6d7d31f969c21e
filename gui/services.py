"""What the window gets from the outside world, in one place so tests can substitute each part."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gui.config import default_config_path
from gui.model_tasks import DownloadTuning
from realtime.api import (
    CATALOGUE,
    CameraInfo,
    CameraMode,
    ModelEntry,
    ModelOptions,
    list_cameras,
    probe_modes,
)

ALLOW_UNVERIFIED_ENV = "FACECAST_ALLOW_UNVERIFIED"


def _list_cameras() -> Sequence[CameraInfo]:
    return list_cameras()


def _probe_modes(index: int) -> tuple[CameraMode, ...]:
    return probe_modes(index)


def _open_path(path: Path, failed: Callable[[], None]) -> None:
    """A file or folder in the desktop's own application (file manager, text editor); `failed` is
    called (on the GUI thread) when nothing opened it. On Linux xdg-open is run and its exit status
    read: Qt reports success as soon as xdg-open starts, even when it then finds no application (a
    bare X session), and the click did nothing visible."""
    from PyQt6.QtCore import QProcess, QUrl
    from PyQt6.QtGui import QDesktopServices

    opener = shutil.which("xdg-open") if sys.platform.startswith("linux") else None
    if opener is None:
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            failed()
        return
    process = QProcess()
    _OPENERS.add(process)  # kept alive until it ends

    def done(code: int, status: QProcess.ExitStatus) -> None:
        _OPENERS.discard(process)
        process.deleteLater()
        if code != 0 or status != QProcess.ExitStatus.NormalExit:
            failed()

    process.finished.connect(done)
    process.errorOccurred.connect(lambda _error: done(1, QProcess.ExitStatus.CrashExit))
    process.setStandardOutputFile(QProcess.nullDevice())
    process.setStandardErrorFile(QProcess.nullDevice())
    process.start(opener, [str(path)])


_OPENERS: set[object] = set()  # xdg-open processes still running (see _open_path)


@dataclass(frozen=True)
class AppServices:
    """config_path: the settings file. model_options: where the models are. vcam_backend: a pyvirtualcam
    backend name (None tries each installed one). platform: which OS's driver instructions to show.
    catalogue, download_tuning: what the Models dialog offers and how it fetches (tests: a local
    server). models_dialog_at_start: open it when the start-up check finds models missing."""

    config_path: Path = field(default_factory=default_config_path)
    model_options: ModelOptions = field(default_factory=ModelOptions)
    vcam_backend: str | None = None
    platform: str = sys.platform
    list_cameras: Callable[[], Sequence[CameraInfo]] = _list_cameras
    probe_modes: Callable[[int], tuple[CameraMode, ...]] = _probe_modes
    catalogue: tuple[ModelEntry, ...] = CATALOGUE
    download_tuning: DownloadTuning = field(default_factory=DownloadTuning)
    models_dialog_at_start: bool = True
    log_path: Path | None = None  # the log file, when this run writes one
    log_dir: Path | None = None  # where run_gui starts one (None: the user's log folder)
    # Opens a file or folder on the desktop; calls its second argument when nothing could.
    open_path: Callable[[Path, Callable[[], None]], None] = _open_path

    @staticmethod
    def from_environment() -> AppServices:
        """Defaults, plus $FACECAST_CONFIG, $FACECAST_MODELS_DIR and $FACECAST_ALLOW_UNVERIFIED=1."""
        allow = os.environ.get(ALLOW_UNVERIFIED_ENV, "").strip().lower() in ("1", "true", "yes")
        return AppServices(model_options=ModelOptions(allow_unverified=allow))
