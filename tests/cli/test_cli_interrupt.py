"""Ctrl+C at any moment ends a run with exit 130 and no traceback: during start-up with nothing
recorded (a KeyboardInterrupt raised while numba compiled, inside an llvmlite callback, was
swallowed, and the run went on to record the whole input and exit 0), while main.py imports (Python's
own handler printed a traceback), and while running with the output finished (that exited 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from models.fakes.doubles import write_all
from tests.cli.test_cli_end_to_end import run_args
from tests.fixtures_media import make_test_video
from tests.paths import REPO_ROOT
from tests.signals import CHILD_SIGNALS, default_handlers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child: POSIX")


@pytest.mark.slow
def test_ctrl_c_at_several_points_of_start_up_exits_130_with_nothing_recorded(tmp_path: Path) -> None:
    import cv2

    from realtime.tools.bench import astronaut_bgr

    models = tmp_path / "models"
    write_all(models)
    photo = tmp_path / "me.png"
    cv2.imwrite(str(photo), astronaut_bgr())
    clip = make_test_video(tmp_path / "clip.mp4", frames=30, size=(160, 120), fps=25.0)
    # An empty cache in each run: the pixel loops compile (inside llvmlite) as on a first run.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "FACECAST_CONSENT": "1"}
    outcomes = []

    def start(out: Path) -> subprocess.Popen[str]:
        args = run_args(models, photo, clip, out, "--loop", "--realtime")
        return subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "main.py"), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **CHILD_SIGNALS,
        )  # fmt: skip

    # How long start-up takes here (a first run compiles; a loaded machine is slower): the
    # signals below land at fractions of it, after main.py's own imports (~0.3 s).
    started = time.monotonic()
    probe = start(tmp_path / "probe.mp4")
    assert probe.stdout is not None
    for line in probe.stdout:
        if line.startswith("running:"):
            break
    startup = time.monotonic() - started
    probe.send_signal(signal.SIGINT)
    probe.communicate(timeout=60)
    assert probe.returncode == 130
    delays = sorted({round(max(0.4, f * startup), 2) for f in (0.3, 0.5, 0.7, 0.85)})
    for delay in delays:
        out = tmp_path / f"take-{delay}.mp4"
        env["NUMBA_CACHE_DIR"] = str(tmp_path / f"numba-{delay}")
        proc = start(out)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            text, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
            raise AssertionError(f"still running 60 s after Ctrl+C at {delay} s: {text}") from None
        assert "Traceback" not in text, text
        assert proc.returncode == 130, (delay, text)
        if "running:" in text:  # the run had started: Ctrl+C stopped it and finished the file
            outcomes.append("stopped")
        else:
            assert not out.exists() and not list(tmp_path.glob(".*partial*")), text
            outcomes.append("interrupted")
    assert outcomes.count("interrupted") >= 2, (startup, delays, outcomes)  # most land in start-up


def test_ctrl_c_inside_a_native_callback_during_start_up_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What llvmlite does while numba compiles: Python code called back from C. A KeyboardInterrupt
    raised there is printed as "Exception ignored" and dropped; the run must still stop."""
    import ctypes
    import io

    import cv2

    import main
    from realtime.tools.bench import astronaut_bgr
    from realtime.wiring import face_swap as wiring

    models = tmp_path / "models"
    write_all(models)
    photo = tmp_path / "me.png"
    cv2.imwrite(str(photo), astronaut_bgr())
    clip = make_test_video(tmp_path / "clip.mp4", frames=10, size=(160, 120), fps=25.0)
    monkeypatch.setenv("FACECAST_CONSENT", "1")
    real_prepare = wiring.prepare_face_swap

    def interrupted_in_a_callback() -> int:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # Python runs the handler here, between bytecodes
            pass
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int)(interrupted_in_a_callback)

    def prepare(*args: object, **kwargs: object) -> object:
        callback()
        return real_prepare(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(wiring, "prepare_face_swap", prepare)
    out = tmp_path / "take.mp4"
    # --realtime: the engine's own run (a file job handles its signals itself).
    with default_handlers():  # as from a terminal: an inherited "ignore Ctrl+C" would hide it
        code = main.main(run_args(models, photo, clip, out, "--realtime"), out=io.StringIO())
    assert code == 130
    assert not out.exists() and not list(tmp_path.glob(".*partial*"))


def _start_run(tmp_path: Path, *python_flags: str) -> tuple[subprocess.Popen[str], Path]:
    import cv2

    from realtime.tools.bench import astronaut_bgr

    models = tmp_path / "models"
    if not models.exists():
        write_all(models)
    photo = tmp_path / "me.png"
    if not photo.exists():
        cv2.imwrite(str(photo), astronaut_bgr())
    clip = tmp_path / "clip.mp4"
    if not clip.exists():
        make_test_video(clip, frames=10, size=(160, 120), fps=25.0)
    out = tmp_path / f"take-{len(list(tmp_path.glob('take-*')))}.mp4"
    env = {**os.environ, "FACECAST_CONSENT": "1"}
    args = run_args(models, photo, clip, out, "--realtime")
    proc = subprocess.Popen(
        [sys.executable, *python_flags, str(REPO_ROOT / "main.py"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **CHILD_SIGNALS,
    )  # fmt: skip
    return proc, out


@pytest.mark.parametrize("delay", [0.08, 0.14, 0.2])
def test_ctrl_c_in_the_first_fifth_of_a_second_exits_130_without_a_traceback(
    tmp_path: Path, delay: float
) -> None:
    """In the first ~0.3 s main.py is still importing its modules: Python's own handler printed a
    KeyboardInterrupt traceback there."""
    proc, out = _start_run(tmp_path)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert not out.exists()


def test_ctrl_c_while_main_py_imports_its_own_modules_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """The signal lands just as main.py starts importing (seen on stderr by -X importtime), not at
    a fixed delay that a loaded machine would shift."""
    proc, out = _start_run(tmp_path, "-X", "importtime")
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if line.rstrip().endswith("| platformdirs"):  # main.py's first import of its own
            proc.send_signal(signal.SIGINT)
            break
    _, rest = proc.communicate(timeout=60)
    err = "".join(seen) + rest
    assert any(line.rstrip().endswith("| platformdirs") for line in seen), err[-2000:]
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert not out.exists()
