"""`main.py run --remote` stopped by Ctrl+C or `kill`: it hangs up, finishes the recording and exits
as the local run does (130, 143), not 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import cv2
import pytest

from realtime.api import ExitCode
from realtime.remote.runner import ServerThread
from tests.paths import REPO_ROOT
from tests.realtime.remote.conftest import TOKEN, frame_image
from tests.realtime.remote.test_faults import wait_for
from tests.signals import CHILD_SIGNALS

pytestmark = pytest.mark.timeout(180)


def frames_swapped(server: ServerThread) -> int:
    """Frames the server's engines have sent back, over its running streams."""
    engines = [s.engine for s in list(server.server.sessions.values()) if s.engine is not None]
    return sum(e.stats().frames_out for e in engines)


@pytest.mark.parametrize(("how", "code"), [("SIGINT", ExitCode.SIGINT), ("SIGTERM", ExitCode.SIGTERM)])
def test_a_signal_hangs_up_finishes_the_output_and_exits_with_the_signals_code(
    tmp_path: Path, photo: Path, start_server: Callable[..., ServerThread], how: str, code: int
) -> None:
    server = start_server()
    still = tmp_path / "still.png"
    cv2.imwrite(str(still), frame_image())
    out = tmp_path / "take.mp4"
    cmd = [
        sys.executable, str(REPO_ROOT / "main.py"), "run", "--remote", server.url, "--token", TOKEN,
        "--consent", "--source", str(photo), "--input", str(still), "--loop", "--fps", "10",
        "--output", str(out),
    ]  # fmt: skip
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, text=True, **CHILD_SIGNALS
        )
    lines: list[str] = []
    assert proc.stdout is not None
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    drain.start()
    try:
        wait_for(lambda: frames_swapped(server) > 5 or proc.poll() is not None, 90, "swapped frames")
        assert proc.poll() is None, "".join(lines) + err_path.read_text(encoding="utf-8")
        proc.send_signal(getattr(signal, how))
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    drain.join(10)
    text, errors = "".join(lines), err_path.read_text(encoding="utf-8")
    assert rc == code, text + errors  # 130 for Ctrl+C, 143 for SIGTERM; it was 0
    assert "Traceback" not in errors, errors
    assert f"stopping ({how})" in text and "done:" in text, text
    # The server heard the hang-up (a DELETE), not its idle timeout.
    assert not server.server.sessions
    assert [ended.reason for ended in server.server.ended.values()] == ["the client hung up"]
    # The recording is finished: renamed into place and playable.
    assert not list(tmp_path.glob(".*partial*"))
    video = cv2.VideoCapture(str(out))
    try:
        ok, _ = video.read()
    finally:
        video.release()
    assert ok
