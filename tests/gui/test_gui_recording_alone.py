"""A recording that cannot be written stops alone and says why: the preview and the virtual
camera go on (docs/GUI.md). A folder the panel may not even look into stopped the whole run with
"Could not start: [Errno 13] Permission denied" and a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from pytestqt.qtbot import QtBot

from gui.controller import RunState
from tests.access import lock, unlock, without_root_rights
from tests.gui.test_gui_helpers import open_window, run_config
from tests.paths import REPO_ROOT
from tests.small_disk import small_disk

_AS_ANOTHER_USER = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from gui.config import OutputConfig
from gui.controller import make_sink
told = []
config = OutputConfig(record=True, record_path={path!r}, vcam=False)
sink = make_sink(config, lambda e: None, on_recording_failed=lambda e: told.append(e.user_message()))
sink.open(64, 48, 25.0)  # raised PermissionError before the sink was even built
sink.close()
print("told:", told)
"""


def test_a_folder_the_panel_may_not_look_into_stops_the_recording_alone(tmp_path: Path) -> None:
    prefix = without_root_rights()
    locked = tmp_path / "locked"
    lock(locked)
    code = _AS_ANOTHER_USER.format(root=str(REPO_ROOT), path=str(locked / "take.mp4"))
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
            check=False,
        )
    finally:
        unlock(locked)
    assert done.returncode == 0, done.stderr
    assert "told: ['Cannot write output" in done.stdout and "Permission denied" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_recording_folder_that_cannot_be_written_stops_only_the_recording(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    with small_disk(tmp_path / "read-only", 1 << 20, read_only=True) as folder:
        config = run_config((), vcam=False)
        config = replace(
            config, output=replace(config.output, record=True, record_path=str(folder / "t.mp4"))
        )
        window = open_window(qtbot, tmp_path, models_dir, config)
        window.toggle_running()
        qtbot.waitUntil(lambda: window.controller.state == RunState.RUNNING, timeout=15_000)
        qtbot.waitUntil(lambda: (s := window.controller.stats()) is not None and s.frames_out >= 5,
                        timeout=30_000)  # fmt: skip
        texts = " ".join(window.messages.texts())
        assert "Recording stopped: Cannot write output" in texts and "preview carry on" in texts
        assert window.rec_indicator.isHidden()
        window.toggle_running()
        qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=15_000)
