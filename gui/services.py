"""What the window gets from the outside world, in one place so tests can substitute each part."""

from __future__ import annotations

import os
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


def _open_path(path: Path) -> bool:
    """A file or folder in the desktop's own application (file manager, text editor); False when
    the desktop has none for it (a bare X session, a server without xdg-open)."""
    from PyQt6.QtCore import QUrl
    from PyQt6.QtGui import QDesktopServices

    return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))))


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
    # Returns False when nothing opened it (None counts as opened: a caller that cannot tell).
    open_path: Callable[[Path], bool | None] = _open_path

    @staticmethod
    def from_environment() -> AppServices:
        """Defaults, plus $FACECAST_CONFIG, $FACECAST_MODELS_DIR and $FACECAST_ALLOW_UNVERIFIED=1."""
        allow = os.environ.get(ALLOW_UNVERIFIED_ENV, "").strip().lower() in ("1", "true", "yes")
        return AppServices(model_options=ModelOptions(allow_unverified=allow))
