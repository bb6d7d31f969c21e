"""The panel's runs leave a rotating log file, and the panel opens it."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from PyQt6.QtCore import Qt
from pytestqt.qtbot import QtBot

from gui.config import ConfigStore
from gui.log_file import install_log_file
from gui.main_window import MainWindow
from tests.gui.test_gui_helpers import run_config, services_for


def test_the_log_file_keeps_what_happened_and_rotates_instead_of_growing(tmp_path: Path) -> None:
    logger = logging.getLogger("facecast-test-log")
    logger.propagate = False
    path = install_log_file(tmp_path / "logs", max_bytes=4_000, logger=logger)
    try:
        assert path == tmp_path / "logs" / "facecast.log"
        logger.info("camera opened")
        logger.debug("too detailed for the file")
        for i in range(200):
            logger.warning("frame %d was late", i)
    finally:
        for handler in list(logger.handlers):
            handler.close()
            logger.removeHandler(handler)
    text = path.read_text(encoding="utf-8")
    assert "frame 199 was late" in text and "too detailed" not in text
    rotated = sorted(p.name for p in path.parent.iterdir())
    assert rotated == ["facecast.log", "facecast.log.1", "facecast.log.2", "facecast.log.3"]
    assert all(p.stat().st_size < 4_200 for p in path.parent.iterdir())


def test_a_log_folder_that_cannot_be_written_leaves_the_app_running_without_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    assert install_log_file(blocker, logger=logging.getLogger("facecast-test-nolog")) is None


def test_the_log_button_opens_this_runs_log_file(qtbot: QtBot, tmp_path: Path, models_dir: Path) -> None:
    opened: list[Path] = []
    log_path = tmp_path / "facecast.log"
    services = replace(
        services_for(tmp_path, models_dir),
        log_path=log_path,
        open_path=lambda path, _failed: opened.append(path),
    )
    window = MainWindow(services, ConfigStore(services.config_path), run_config((), vcam=False))
    qtbot.addWidget(window)
    assert str(log_path) in window.log_button.toolTip()
    qtbot.mouseClick(window.log_button, Qt.MouseButton.LeftButton)
    assert opened == [log_path]

    no_file = MainWindow(
        services_for(tmp_path, models_dir), ConfigStore(tmp_path / "s2.toml"), run_config((), vcam=False)
    )
    qtbot.addWidget(no_file)
    assert not no_file.log_button.isEnabled()


@pytest.mark.parametrize("desktop", ["no opener", "an opener that finds no application"])
def test_where_nothing_opens_the_log_the_panel_shows_it_itself(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch, desktop: str
) -> None:
    """On a bare X session the Log button did nothing visible: xdg-open started, found no
    application for a .log file and gave up (exit 3), and Qt had already called it a success."""
    programs = tmp_path / "programs"
    programs.mkdir()
    if desktop != "no opener":  # what xdg-open does on a desktop with no application for it
        opener = programs / "xdg-open"
        opener.write_text("#!/bin/sh\necho 'xdg-open: no method available' >&2\nexit 3\n")
        opener.chmod(0o755)
    monkeypatch.setenv("PATH", str(programs))
    log_path = tmp_path / "facecast.log"
    log_path.write_text("INFO first line\nWARNING the line to read\n", encoding="utf-8")
    services = replace(services_for(tmp_path, models_dir), log_path=log_path)  # the real opener
    window = MainWindow(services, ConfigStore(services.config_path), run_config((), vcam=False))
    qtbot.addWidget(window)
    qtbot.mouseClick(window.log_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.log_viewer is not None and window.log_viewer.isVisible(), timeout=10_000)
    viewer = window.log_viewer
    assert viewer is not None
    assert "WARNING the line to read" in viewer.text.toPlainText() and str(log_path) in viewer.windowTitle()
    viewer.close()
