"""Whether a window can open here (Linux): a display is named AND answers.

Qt aborts the whole process when it cannot connect to the display (exit 134), and its message
then blames a missing libxcb-cursor0 even when that is installed. A stale DISPLAY (an SSH session
without X forwarding, tmux started in another session, WSL with no X server) is common, so the
display's socket is tried first: a plain connect, no X protocol (no Qt, no Xlib needed).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# [host]:N[.screen]; an IPv6 host in brackets ([::1]:10).
_X_DISPLAY = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]*\]|[^:]*):(?P<number>\d+)(\.\d+)?$")
_CONNECT_TIMEOUT_S = 1.0


def display_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why no window can open on this machine's display, or None (a display answers, or this is
    not Linux, or Qt is told to use another platform plugin)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux") or env.get("QT_QPA_PLATFORM"):
        return None
    wayland, x11 = env.get("WAYLAND_DISPLAY", ""), env.get("DISPLAY", "")
    if not wayland and not x11:
        return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    if wayland and _wayland_answers(wayland, env.get("XDG_RUNTIME_DIR", "")):
        return None
    if x11:
        why = _x11_problem(x11)
        return None if why is None else f"the display DISPLAY={x11} does not answer ({why})"
    return f"the Wayland display {wayland} does not answer (no socket)"


def _wayland_answers(name: str, runtime_dir: str) -> bool:
    path = Path(name) if os.path.isabs(name) else Path(runtime_dir or "/nonexistent") / name
    return _unix_connects(str(path))


def _x11_problem(display: str) -> str | None:
    match = _X_DISPLAY.match(display)
    if match is None:
        return "not a display name like :0 or localhost:10.0"
    host, number = match["host"], int(match["number"])
    if host in ("", "unix") or host.startswith("/"):
        path = f"/tmp/.X11-unix/X{number}"
        # Linux X servers listen on an abstract socket too (what Xlib tries first).
        if _unix_connects("\0" + path) or _unix_connects(path):
            return None
        return f"no X server listening on {path}"
    host = host.removeprefix("[").removesuffix("]")
    try:
        with socket.create_connection((host, 6000 + number), timeout=_CONNECT_TIMEOUT_S):
            return None
    except OSError as err:
        return f"cannot connect to {host}:{6000 + number}: {err.strerror or err}"


def _unix_connects(address: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_CONNECT_TIMEOUT_S)
        try:
            sock.connect(address)
        except OSError:
            return False
    return True


def qt_x11_libraries_missing(env: Mapping[str, str] | None = None) -> list[str]:
    """The system libraries Qt's X11 plugin needs and this machine lacks (Linux, X11 only), e.g.
    ["libxcb-icccm.so.4"]: without them Qt aborts at start-up saying only that reinstalling the
    application may help. Read with `ldd` from the installed plugin; [] when there is nothing to
    check (another system, Wayland, another Qt platform, no PyQt6 or no ldd)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux") or env.get("QT_QPA_PLATFORM") or env.get("WAYLAND_DISPLAY"):
        return []
    spec = importlib.util.find_spec("PyQt6")  # found, not imported: the engine never imports Qt
    ldd = shutil.which("ldd")
    if spec is None or not spec.submodule_search_locations or ldd is None:
        return []
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt6/plugins/platforms/libqxcb.so"
    if not plugin.is_file():
        return []
    try:
        listing = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    missing = re.findall(r"^\s*(\S+) => not found", listing.stdout, flags=re.MULTILINE)
    return sorted(set(missing))


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library: libxcb-icccm.so.4 -> libxcb-icccm4,
    libxkbcommon-x11.so.0 -> libxkbcommon-x11-0 (a hyphen when the name ends in a digit)."""
    name, _, version = soname.partition(".so.")
    major = version.split(".", 1)[0]
    return f"{name}-{major}" if name[-1:].isdigit() else f"{name}{major}"
