"""Whether a window can open here (Linux): a display is named AND answers.

Qt aborts the whole process when it cannot connect to the display (exit 134), and its message
then blames a missing libxcb-cursor0 even when that is installed. A stale DISPLAY (an SSH session
without X forwarding, tmux started in another session, WSL with no X server) is common, so the
display's socket is tried first: a plain connect, no X protocol (no Qt, no Xlib needed).
"""

from __future__ import annotations

import os
import re
import socket
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
