"""The control panel as a process: how it ends when the terminal or the system asks it to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
sys.path.insert(0, {root!r})
from dataclasses import replace
from pathlib import Path
from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QApplication
import gui.app as gui_app
from gui.config import ConfigStore, OutputConfig
from tests.test_gui_helpers import run_config, services_for, write_face_photo, write_models

tmp = Path(sys.argv[1])
app = QApplication([])
services = services_for(tmp, write_models(tmp / "models"))
config = run_config(write_face_photo(tmp / "me.png"), vcam=False)
config = replace(config, output=replace(config.output, record=True, record_path=str(tmp / "take.mp4")))
ConfigStore(services.config_path).save(config)
made = gui_app.create_window

def create_window(*args):
    window = made(*args)
    if sys.argv[2] == "running":
        QTimer.singleShot(100, window.toggle_running)
        def say_when_running():
            if window.controller.stats() is not None and window.controller.stats().frames_out >= 5:
                print("running", flush=True)
            else:
                QTimer.singleShot(100, say_when_running)
        QTimer.singleShot(200, say_when_running)
    else:
        QTimer.singleShot(300, lambda: print("running", flush=True))
    return window

gui_app.create_window = create_window
code = gui_app.run_gui([], services)
print("exit", code, flush=True)
sys.exit(code)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("state", ["idle", "running"])
def test_a_signal_closes_the_window_like_its_close_button(tmp_path: Path, signum: int, state: str) -> None:
    """Ctrl+C aborted the app from inside a Qt slot (SIGABRT): the recording stayed a hidden partial
    file and the settings were not saved. While idle it did nothing at all."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    child = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), state],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while "running" not in line and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line and child.poll() is not None:
                break
        assert "running" in line, child.stderr.read() if child.stderr else ""
        settings = tmp_path / "settings.toml"
        before = settings.stat().st_mtime_ns
        time.sleep(0.05)
        child.send_signal(signum)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "exit 0" in out and "Traceback" not in err
    assert settings.stat().st_mtime_ns != before  # saved on the way out
    if state == "running":
        take = tmp_path / "take.mp4"
        assert take.is_file() and take.stat().st_size > 0  # finalised, not a hidden partial
        assert not list(tmp_path.glob(".take*partial*"))


def test_an_error_escaping_a_slot_is_shown_not_fatal(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Under PyQt6 any exception leaving a slot aborted the whole app (recording and settings lost);
    the window's hook logs it and shows it instead."""
    from gui.app import report_unhandled
    from tests.test_gui_helpers import open_window, run_config, write_face_photo, write_models

    models = write_models(tmp_path / "models")
    window = open_window(
        qtbot, tmp_path, models, run_config(write_face_photo(tmp_path / "me.png"), vcam=False)
    )
    try:
        raise ValueError("a bug in a slot")
    except ValueError as exc:
        report_unhandled(window, ValueError, exc, exc.__traceback__)
    assert any("Internal error: ValueError: a bug in a slot" in t for t in window.messages.texts())
    assert window.isVisible()


def test_a_path_typed_but_not_confirmed_is_saved_on_close(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Closing the window right after typing a recording path (no Return, no Tab) lost it: the
    window showed it, the settings file did not have it."""
    from dataclasses import replace

    from gui.config import ConfigStore
    from tests.test_gui_helpers import open_window, run_config, write_face_photo, write_models

    models = write_models(tmp_path / "models")
    config = run_config(write_face_photo(tmp_path / "me.png"), vcam=False)
    config = replace(config, output=replace(config.output, record=True))
    window = open_window(qtbot, tmp_path, models, config)
    window.tabs.setCurrentIndex(2)  # Output
    window.activateWindow()
    edit = window.output_panel.record_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    wanted = str(tmp_path / "interview.mp4")
    qtbot.keyClicks(edit, wanted)
    window.close()
    saved = ConfigStore(tmp_path / "settings.toml").load().config
    assert saved.output.record_path == wanted
