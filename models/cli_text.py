"""Commands to show the user in hints, spelled so they work when pasted.

A bare `python main.py ...` often fails: `python` is missing on macOS and Debian, or is another
interpreter without FaceCast's packages. Hints name the interpreter that is running (the venv's)
and main.py where it is, relative to the current folder when they are inside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _relative_text(path: Path) -> str:
    """`path` relative to the current folder when inside it, else as given."""
    try:
        text = os.path.relpath(path)
        if text.startswith(".."):
            text = str(path)
    except ValueError:  # another drive on Windows
        text = str(path)
    return text


def shown_path(path: Path, platform: str = sys.platform) -> str:
    """A program's path as the first word of a command: relative when inside the current folder,
    quoted when it holds spaces (PowerShell runs a quoted program only after `&`)."""
    text = _relative_text(path)
    if " " in text:
        return f'& "{text}"' if platform == "win32" else f'"{text}"'
    return text


def shown_arg(path: Path) -> str:
    """`path` as a command's argument: like shown_path, in plain double quotes when it holds spaces."""
    text = _relative_text(path)
    return f'"{text}"' if " " in text else text


def app_command(args: str) -> str:
    """'.venv/bin/python main.py ARGS', as this interpreter and this checkout spell it."""
    # main.py is an argument: `&` goes before the program only (PowerShell rejects a second one).
    return f"{shown_path(Path(sys.executable))} {shown_arg(PROJECT_ROOT / 'main.py')} {args}"


def installer_command(platform: str = sys.platform) -> str:
    """How to (re)run the installer: with the system Python, which has no FaceCast packages."""
    script = shown_path(PROJECT_ROOT / "scripts" / "install.py", platform)
    return f"py -3 {script}" if platform == "win32" else f"python3 {script}"
