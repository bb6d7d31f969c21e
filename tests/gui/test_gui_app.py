"""The control panel as a process: how it ends when the terminal or the system asks it to."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT
from tests.signals import CHILD_SIGNALS, default_handlers

ROOT = REPO_ROOT

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
from tests.gui.test_gui_helpers import run_config, services_for, write_face_photo, write_models

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
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, **CHILD_SIGNALS,
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
    assert child.returncode == 0, (child.returncode, out, err[-3000:])
    assert "exit 0" in out and "Traceback" not in err
    assert settings.stat().st_mtime_ns != before  # saved on the way out
    assert "control panel starting" in (tmp_path / "logs" / "facecast.log").read_text()  # not the user's log
    if state == "running":
        take = tmp_path / "take.mp4"
        assert take.is_file() and take.stat().st_size > 0  # finalised, not a hidden partial
        assert not list(tmp_path.glob(".take*partial*"))


def test_an_error_escaping_a_slot_is_shown_not_fatal(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Under PyQt6 any exception leaving a slot aborted the whole app (recording and settings lost);
    the window's hook logs it and shows it instead."""
    from gui.app import report_unhandled
    from tests.gui.test_gui_helpers import open_window, run_config, write_face_photo, write_models

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
    from tests.gui.test_gui_helpers import open_window, run_config, write_face_photo, write_models

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


def test_missing_face_models_are_named_at_start_and_used_once_downloaded(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With the recogniser missing, the run passed frames through while the preview blamed the
    photo ('no usable source face chosen'); models downloaded while the window was open were
    ignored until a restart."""
    from gui.controller import RunState
    from gui.models_banner import MODELS_BANNER
    from tests.gui.test_gui_helpers import open_window, run_config, write_face_photo, write_models

    models = tmp_path / "models"
    models.mkdir()
    window = open_window(
        qtbot, tmp_path, models, run_config(write_face_photo(tmp_path / "me.png"), vcam=False)
    )
    card_result = lambda: next(iter(window.gallery._cards.values())).result  # noqa: E731
    qtbot.waitUntil(lambda: card_result() is not None, timeout=15_000)
    assert card_result().identity is None and "w600k_r50.onnx" in card_result().models_missing

    window.toggle_running()
    assert any(t.startswith(MODELS_BANNER) and "w600k_r50.onnx" in t for t in window.messages.texts())
    qtbot.waitUntil(lambda: window.controller.state == RunState.RUNNING, timeout=15_000)
    qtbot.waitUntil(lambda: "needs the face models" in window.preview.badge, timeout=5_000)
    window.toggle_running()
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)

    write_models(models)  # the user follows the hint while the window is open
    window.gallery.retry_missing_models()
    qtbot.waitUntil(lambda: window.gallery.active_identity() is not None, timeout=15_000)


def test_a_dropped_stage_setting_or_preset_keeps_the_original_file(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The values the window drops at start were written over on exit with no backup, although
    the guide promises settings.toml.bak for any value that cannot be used."""
    from tests.gui.test_gui_helpers import services_for, write_models

    models = write_models(tmp_path / "models")
    settings = tmp_path / "settings.toml"
    original = (
        'consent_accepted = true\npreset = "turbo"\n\n'
        '[overrides]\n"detector.size" = 300\n"tracker.beta" = 0.2\n'
    )
    settings.write_text(original)
    from gui.config import ConfigStore
    from gui.main_window import MainWindow

    services = services_for(tmp_path, models)
    store = ConfigStore(services.config_path)
    loaded = store.load()
    window = MainWindow(services, store, loaded.config, loaded.message)
    qtbot.addWidget(window)
    texts = window.messages.texts()
    assert any("turbo" in t for t in texts) and any("detector.size" in t for t in texts)
    assert any("settings.toml.bak" in t for t in texts)
    window.close()
    assert (tmp_path / "settings.toml.bak").read_text() == original


def test_a_stream_address_typed_as_the_video_says_what_streams_need() -> None:
    """It said 'Video file not found: rtsp:/192.168.1.20:554/stream1' (one '/' lost)."""
    from gui.config import InputConfig
    from gui.controller import make_source
    from realtime.core.errors import SourceError

    with pytest.raises(SourceError, match="Network streams are not read by the CPU decoder") as info:
        make_source(InputConfig(kind="video", video_path="rtsp://192.168.1.20:554/stream1"))
    assert "rtsp://192.168.1.20:554/stream1" in info.value.user_message()


def test_the_default_provider_decodes_videos_on_the_gpu_where_the_models_run_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With provider 'auto' (the default) on an NVIDIA machine the video went to the CPU decoder."""
    from gui import controller
    from gui.config import InputConfig
    from gui.controller import make_source
    from realtime.io import nvdec

    opened: list[str] = []

    def fake_open_input(path: str, **kwargs: object) -> tuple[object, str]:
        opened.append(path)
        return object(), ""

    monkeypatch.setattr(nvdec, "open_nvdec_input", fake_open_input)
    monkeypatch.setattr(controller, "auto_provider", lambda: "cuda")
    video = str(tmp_path / "clip.mp4")
    make_source(InputConfig(kind="video", video_path=video), "auto")
    assert opened == [video]
    monkeypatch.setattr(controller, "auto_provider", lambda: "cpu")
    source = make_source(InputConfig(kind="video", video_path=video), "auto")
    assert type(source).__name__ == "VideoFileSource"
    assert opened == [video]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_an_ignored_hang_up_stays_ignored_and_handlers_come_back_after_the_window(
    qtbot, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Under `nohup` the window closed when the terminal did; after the window had closed, `kill`
    and Ctrl+C only scheduled a close on a dead event loop and did nothing."""
    from gui.app import close_on_signals
    from tests.gui.test_gui_helpers import open_window, run_config, write_face_photo, write_models

    window = open_window(
        qtbot,
        tmp_path,
        write_models(tmp_path / "models"),
        run_config(write_face_photo(tmp_path / "me.png"), vcam=False),
    )
    stack = contextlib.ExitStack()
    stack.enter_context(default_handlers())  # a terminal's dispositions, whatever this run inherited
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does
    try:
        replaced = close_on_signals(window)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert set(replaced) == {signal.SIGINT, signal.SIGTERM}
        for sig, handler in replaced.items():
            signal.signal(sig, handler)
        assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        stack.close()
