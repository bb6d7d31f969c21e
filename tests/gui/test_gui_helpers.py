"""Helpers shared by the tests/gui/test_gui_*.py modules (this module holds no tests itself).

Model doubles, a source photo, and a MainWindow wired to them: offline, no camera, no display.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

from pathlib import Path

import cv2
import numpy as np
from pytestqt.qtbot import QtBot

from gui.config import ConfigStore, GuiConfig, InputConfig, OutputConfig
from gui.main_window import MainWindow
from gui.services import AppServices
from models.fakes.doubles import write_all
from realtime.tools.bench import astronaut_bgr
from realtime.wiring.face_swap import ModelOptions

SIZE = (320, 240)


def write_models(folder: Path) -> Path:
    """Contract-exact doubles of every catalogue model, under their real names."""
    folder.mkdir(parents=True, exist_ok=True)
    write_all(folder)
    return folder


def write_face_photo(path: Path, variant: int = 0) -> Path:
    """The astronaut, mirrored (a clear face, not the test pattern's own picture). variant 1 is her
    unmirrored photo: still skin to the detector double, another identity to the recogniser double."""
    image = astronaut_bgr()[:, ::-1].copy()
    if variant == 1:
        image = astronaut_bgr()
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), image)
    return path


def write_blank_photo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((240, 320, 3), 128, np.uint8))
    return path


def run_config(
    photos: Path | tuple[Path, ...],
    *,
    vcam: bool,
    preset: str = "balanced",
    detector: str = "mtcnn",
    fps: float = 30.0,
    disclosure_label: bool = True,
) -> GuiConfig:
    """A consented config running the test pattern at SIZE.

    detector "mtcnn" is built in and finds the astronaut in the test pattern; "det_10g" is the
    near-free double that always reports one face at a fixed place.
    """
    listed = photos if isinstance(photos, tuple) else (photos,)
    return GuiConfig(
        consent_accepted=True,
        preset=preset,
        overrides={"detector.model": detector},
        disclosure_label=disclosure_label,
        photos=tuple(str(p) for p in listed),
        active_face=str(listed[0]) if listed else "",
        input=InputConfig(kind="pattern", width=SIZE[0], height=SIZE[1], fps=fps),
        output=OutputConfig(vcam=vcam, vcam_width=SIZE[0], vcam_height=SIZE[1], vcam_fps=fps),
    )


def services_for(
    tmp_path: Path, models: Path, vcam_backend: str | None = None, platform: str = "linux"
) -> AppServices:
    return AppServices(
        config_path=tmp_path / "settings.toml",
        model_options=ModelOptions(models, allow_unverified=True),
        vcam_backend=vcam_backend,
        platform=platform,
        list_cameras=list,
        log_dir=tmp_path / "logs",  # never the user's own log folder
    )


def open_window(
    qtbot: QtBot,
    tmp_path: Path,
    models: Path,
    config: GuiConfig,
    vcam_backend: str | None = None,
    load_message: str = "",
) -> MainWindow:
    services = services_for(tmp_path, models, vcam_backend)
    window = MainWindow(services, ConfigStore(services.config_path), config, load_message)
    qtbot.addWidget(window)
    window.show()
    return window


def wait_for_face(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: window.gallery.active_identity() is not None, timeout=15_000)
