"""A window opens only where a display answers: with a stale DISPLAY (SSH without X forwarding, tmux
from another session) Qt aborts the process (exit 134), blaming a library that is installed."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from realtime.io.display import display_problem
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland only")


def test_nothing_named_is_no_display() -> None:
    assert display_problem({}) == "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"


def test_another_qt_platform_needs_no_display() -> None:
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}) is None


def test_a_named_x_display_must_answer() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        number = server.getsockname()[1] - 6000  # X display N listens on TCP port 6000 + N
        assert display_problem({"DISPLAY": f"127.0.0.1:{number}.0"}) is None
    # The same display after its server went away, and a local display with no server.
    problem = display_problem({"DISPLAY": f"127.0.0.1:{number}"})
    assert problem is not None and f"DISPLAY=127.0.0.1:{number} does not answer" in problem
    problem = display_problem({"DISPLAY": ":87"})
    assert problem is not None and "no X server listening on /tmp/.X11-unix/X87" in problem
    problem = display_problem({"DISPLAY": "[::1]:87"})  # IPv6, as libxcb reads it: tried, not refused
    assert problem is not None and "cannot connect to ::1:6087" in problem
    problem = display_problem({"DISPLAY": "garbage"})
    assert problem is not None and "not a display name" in problem


def test_a_local_x_server_on_its_abstract_socket_answers() -> None:
    """Linux X servers listen on the abstract socket "\0/tmp/.X11-unix/XN" (what Xlib tries first)."""
    number = 5000 + os.getpid() % 1000  # not a display this machine has
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(f"\0/tmp/.X11-unix/X{number}")
        server.listen(8)  # never accepted: room for every connect below
        for display in (f":{number}", f":{number}.0", f"unix:{number}"):
            assert display_problem({"DISPLAY": display}) is None, display


def test_a_local_x_server_on_its_path_socket_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker and Flatpak bind-mount /tmp/.X11-unix: there only the path socket answers (the abstract
    one belongs to the host's network namespace)."""
    import realtime.io.display as display_module

    asked: list[str] = []

    def only_the_path(address: str) -> bool:
        asked.append(address)
        return address == "/tmp/.X11-unix/X5"

    monkeypatch.setattr(display_module, "_unix_connects", only_the_path)
    for display in (":5", "unix:5", "/tmp/.X11-unix/X5:5"):
        assert display_problem({"DISPLAY": display}) is None, display
    assert "\0/tmp/.X11-unix/X5" in asked  # the abstract socket was tried too


def test_a_dead_wayland_socket_falls_back_to_x(tmp_path: object) -> None:
    env = {"WAYLAND_DISPLAY": "wayland-7", "XDG_RUNTIME_DIR": str(tmp_path)}
    assert display_problem(env) == "the Wayland display wayland-7 does not answer (no socket)"
    problem = display_problem({**env, "DISPLAY": ":87"})
    assert problem is not None and problem.startswith("the display DISPLAY=:87")


def test_the_control_panel_refuses_a_display_that_does_not_answer(tmp_path: object) -> None:
    """main.py with a DISPLAY that does not answer exits 2 naming it and the outputs that need no
    window. In a subprocess, because Qt would abort the process."""
    import os
    import subprocess
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env |= {"DISPLAY": ":87", "FACECAST_CONFIG": str(Path(str(tmp_path)) / "settings.toml")}
    main = REPO_ROOT / "main.py"
    done = subprocess.run([sys.executable, str(main)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "DISPLAY=:87 does not answer" in done.stderr and "--output vcam|FILE" in done.stderr


def test_the_library_a_package_ships_is_named_for_apt() -> None:
    from realtime.io.display import debian_package

    assert debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert debian_package("libxcb-render-util.so.0.0.0") == "libxcb-render-util0"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's X11 plugin: Linux")
def test_the_libraries_qts_x11_plugin_lacks_are_named_before_qt_aborts() -> None:
    """Without libxcb-icccm4 Qt aborted the panel: "Reinstalling the application may fix this"."""
    import importlib.util
    import shutil
    import subprocess

    from realtime.io.display import qt_x11_libraries_missing

    spec = importlib.util.find_spec("PyQt6")
    ldd = shutil.which("ldd")
    if spec is None or ldd is None or not spec.submodule_search_locations:
        pytest.skip("no PyQt6 or no ldd here")
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt6/plugins/platforms/libqxcb.so"
    listing = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, check=False).stdout
    expected = sorted({line.split()[0] for line in listing.splitlines() if "not found" in line})
    assert qt_x11_libraries_missing({"DISPLAY": ":0"}) == expected
    assert qt_x11_libraries_missing({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}) == []
    assert qt_x11_libraries_missing({"WAYLAND_DISPLAY": "wayland-0"}) == []
