"""Render screenshots of the control panel's main states into docs/screenshots/.

    python scripts/screenshots.py

Runs fully offline: the models are the contract-exact test doubles (models/fakes/doubles.py), so the "swap"
is the doubles' tint over the detected face, not a real face swap; the input is the built-in test
pattern. The panel is shown on a real X server through Qt's xcb platform: the session's own display
when there is one, else a private Xvfb started on a free display for the run (Debian/Ubuntu:
apt-get install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1). Where neither works it falls
back to Qt's offscreen platform and says so.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

XVFB_SCREEN = "1600x1000x24"


def _start_xvfb() -> str | None:
    """Start Xvfb on a display it picks itself (-displayfd: no race for a free number); the
    display's name, or None when Xvfb is missing or does not start. It stops when we exit."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        return None
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        [xvfb, "-displayfd", str(write_end), "-screen", "0", XVFB_SCREEN, "-nolisten", "tcp"],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write_end)
    with os.fdopen(read_end) as numbers:
        number = numbers.readline().strip()  # written once the server accepts clients
    if not number.isdigit():
        server.kill()
        server.wait()
        return None

    def stop() -> None:
        server.terminate()
        server.wait(10)

    atexit.register(stop)
    return f":{number}"


def _xcb_works() -> bool:
    """Whether Qt's xcb platform starts on $DISPLAY (tried in a child: a missing libxcb-cursor0
    aborts the process that loads the plugin)."""
    probe = "from PyQt6.QtWidgets import QApplication; QApplication([])"
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb"}
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def choose_platform() -> str:
    """Set QT_QPA_PLATFORM (a user's own setting wins): xcb on a real or private X server,
    else offscreen with a note. Returns the platform."""
    if "QT_QPA_PLATFORM" in os.environ:
        return os.environ["QT_QPA_PLATFORM"]
    if not os.environ.get("DISPLAY"):
        display = _start_xvfb()
        if display is not None:
            os.environ["DISPLAY"] = display
            print(f"note: drawing on a private Xvfb at {display} ({XVFB_SCREEN})")
    if os.environ.get("DISPLAY") and _xcb_works():
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        return "xcb"
    print(
        "note: no X display Qt can use (install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1);"
        " drawing with Qt's offscreen platform instead: fonts and style may differ from a desktop's"
    )
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    return "offscreen"


if __name__ == "__main__":
    choose_platform()

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pyvirtualcam  # noqa: E402
import pyvirtualcam.camera  # noqa: E402
from PyQt6.QtCore import QEventLoop, QTimer  # noqa: E402
from PyQt6.QtWidgets import QApplication, QWidget  # noqa: E402

from gui.config import ConfigStore, GuiConfig, InputConfig, OutputConfig  # noqa: E402
from gui.consent import ConsentDialog  # noqa: E402
from gui.controller import ModelsState, RunState  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402
from gui.model_tasks import DownloadTuning  # noqa: E402
from gui.services import AppServices  # noqa: E402
from gui.theme import apply_dark_theme  # noqa: E402
from models.fakes.doubles import write_all  # noqa: E402
from models.files.catalogue import get_entry  # noqa: E402
from realtime.tools.bench import astronaut_bgr  # noqa: E402
from realtime.wiring.face_swap import ModelOptions  # noqa: E402
from tests.gui.model_server import ModelServer, Route, model_server, served_entry  # noqa: E402
from tests.vcam_recorder import recording_backend  # noqa: E402

WINDOW_SIZE = (1440, 880)
PATTERN = (640, 360)


def pump(seconds: float, until: Callable[[], bool] | None = None) -> bool:
    """Run the event loop for up to `seconds`, or until `until()` is true."""
    loop = QEventLoop()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until is not None and until():
            return True
        QTimer.singleShot(15, loop.quit)
        loop.exec()
    return until is None or until()


def save(widget: QWidget, path: Path) -> None:
    pump(0.3)
    if not widget.grab().save(str(path)):
        raise SystemExit(f"could not write {path}")
    print(f"wrote {path}")


def write_inputs(folder: Path) -> tuple[Path, Path, Path]:
    models = folder / "models"
    models.mkdir()
    write_all(models)
    face = folder / "eileen.png"
    cv2.imwrite(str(face), astronaut_bgr()[:, ::-1].copy())
    from skimage import data

    no_face = folder / "coffee.png"
    cv2.imwrite(str(no_face), cv2.cvtColor(np.asarray(data.coffee()), cv2.COLOR_RGB2BGR))
    return models, face, no_face


@contextmanager
def missing_driver_backend() -> Iterator[str]:
    """A pyvirtualcam backend failing exactly as v4l2loopback does when its module is not loaded."""

    class MissingDriver:
        def __init__(self, **kwargs: Any) -> None:
            raise RuntimeError(
                "No v4l2 loopback device found at /dev/video[0-99]. Did you run 'modprobe v4l2loopback'? "
                "See also pyvirtualcam's documentation."
            )

    name = "screenshots-missing-driver"
    pyvirtualcam.register_backend(name, MissingDriver)
    try:
        yield name
    finally:
        pyvirtualcam.camera.BACKENDS.pop(name, None)


def open_window(folder: Path, models: Path, photos: Sequence[Path], vcam_backend: str) -> MainWindow:
    services = AppServices(
        config_path=folder / "settings.toml",
        model_options=ModelOptions(models, allow_unverified=True),
        vcam_backend=vcam_backend,
        platform="linux",
        list_cameras=list,
    )
    config = GuiConfig(
        consent_accepted=True,
        overrides={"detector.model": "mtcnn"},
        photos=tuple(str(p) for p in photos),
        active_face=str(photos[0]),
        input=InputConfig(kind="pattern", width=PATTERN[0], height=PATTERN[1], fps=30.0),
        output=OutputConfig(vcam=True, vcam_width=1280, vcam_height=720, vcam_fps=30.0),
    )
    window = MainWindow(services, ConfigStore(services.config_path), config)
    window.resize(*WINDOW_SIZE)
    window.show()
    return window


def first_run(
    folder: Path, doubles: Path, face: Path, server: ModelServer, vcam_backend: str, out: Path
) -> None:
    """No models -> the Models dialog -> a download from a local server -> running and recording."""
    catalogue = []
    for name in ("inswapper_128", "w600k_r50", "GPEN-BFR-256"):
        real = get_entry(name)
        body = (doubles / real.files[0].name).read_bytes()
        slow = Route(body, chunk=16_384, delay_s=0.03)  # slow enough to be seen downloading
        entry = served_entry(server, real.files[0].name, body, slow, name=name, licence=real.licence)
        catalogue.append(
            # w600k_r50 stands in for the buffalo_l pack, which holds it in the real catalogue.
            replace(
                entry,
                description=real.description,
                licence_url=real.licence_url,
                default=name != "GPEN-BFR-256",
            )
        )
    services = AppServices(
        config_path=folder / "first-run.toml",
        model_options=ModelOptions(folder / "first-run-models", allow_unverified=True),
        vcam_backend=vcam_backend,
        platform="linux",
        list_cameras=list,
        catalogue=tuple(catalogue),
        download_tuning=DownloadTuning(chunk_size=16_384, retry_delay=0.1),
    )
    config = GuiConfig(
        consent_accepted=True,
        overrides={"detector.model": "mtcnn"},
        photos=(str(face),),
        active_face=str(face),
        input=InputConfig(kind="pattern", width=PATTERN[0], height=PATTERN[1], fps=30.0),
        output=OutputConfig(
            vcam=True, vcam_width=1280, vcam_height=720, vcam_fps=30.0, record=True,
            record_path=str(folder / "takes" / "call.mp4"),
        ),
    )  # fmt: skip
    (folder / "takes").mkdir()
    window = MainWindow(services, ConfigStore(services.config_path), config)
    window.resize(*WINDOW_SIZE)
    window.show()
    pump(20, lambda: window.models_dialog is not None and window.models_dialog.isVisible())
    dialog = window.models_dialog
    assert dialog is not None
    dialog.resize(1100, 520)
    pump(10, lambda: dialog.status_text("w600k_r50") == "missing")
    save(window, out / "first_run_banner.png")
    dialog.download_defaults()
    save(dialog, out / "models_licence.png")
    dialog.accept_button.click()
    pump(20, lambda: dialog.row("inswapper_128").bar.value() > 300)
    save(dialog, out / "models_downloading.png")
    pump(
        60, lambda: all(dialog.status_text(n).startswith("verified") for n in ("inswapper_128", "w600k_r50"))
    )
    save(dialog, out / "models_ready.png")
    dialog.hide()
    pump(20, lambda: window.gallery.active_identity() is not None)
    window.toggle_running()
    pump(30, lambda: window.controller.models == ModelsState.READY)
    pump(4.0)
    window.tabs.setCurrentIndex(2)  # Output: the take, the virtual camera, the audio delay
    save(window, out / "recording.png")
    window.toggle_running()
    pump(10, lambda: window.controller.state == RunState.IDLE)
    window.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--seconds", type=float, default=6.0, help="how long to run before the running shots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    app = QApplication(sys.argv[:1])
    app.setApplicationName("FaceCast")
    apply_dark_theme(app)

    with tempfile.TemporaryDirectory() as tmp, recording_backend() as recorder:
        folder = Path(tmp)
        models, face, no_face = write_inputs(folder)
        with model_server() as server:
            first_run(folder, models, face, server, recorder.name, args.out)
        window = open_window(folder, models, (face, no_face), recorder.name)
        pump(20, lambda: all(window.gallery.card(p).result is not None for p in (face, no_face)))
        window.tabs.setCurrentIndex(0)
        save(window, args.out / "idle.png")

        window.toggle_running()
        pump(30, lambda: window.controller.models == ModelsState.READY)
        pump(args.seconds)
        window.tabs.setCurrentIndex(2)  # Output: where the latency to set as audio delay is shown
        save(window, args.out / "running_side_by_side.png")
        window.tabs.setCurrentIndex(3)  # Stages: preset and the per-stage controls, with their ms
        save(window, args.out / "stages.png")
        window.toggle_running()
        pump(10, lambda: window.controller.state == RunState.IDLE)
        window.close()

        with missing_driver_backend() as backend:
            window = open_window(folder, models, (face,), backend)
            pump(20, lambda: window.gallery.active_identity() is not None)
            window.toggle_running()
            pump(20, lambda: not window.output_panel.help_panel.isHidden())
            pump(2.0)
            window.tabs.setCurrentIndex(2)
            save(window, args.out / "vcam_missing.png")
            window.toggle_running()
            pump(10, lambda: window.controller.state == RunState.IDLE)
            window.close()

    dialog = ConsentDialog()
    dialog.show()
    save(dialog, args.out / "consent.png")
    dialog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
