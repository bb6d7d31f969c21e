"""The window's banner for models that are missing or unusable, worded for the window.

The models' message is written for the command line ("Run `…`, then again;"), and its command names
paths relative to the folder the app was started from, which the user cannot see: pasted into a
fresh terminal, a relative `--models-dir` downloads into another folder and the banner stays. Here
the message is reworded and every path in the command is made absolute.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gui.messages import MessageBar

MODELS_BANNER = "Face swapping needs "  # every models banner starts so (one is shown at a time)

_MISSING = re.compile(
    r"Models not downloaded yet: (?P<files>.+?) \(folder (?P<folder>.+?)\)\. "
    r"Run `(?P<command>[^`]+)`(?P<about> \([^()]*\))?"
)
_ONE_MISSING = re.compile(
    r"Model file (?P<file>\S+) \(sha256 [^)]*\) is missing from (?P<folder>.+?)\. Run `(?P<command>[^`]+)`"
)
_COMMAND = re.compile(r"`([^`]*models download[^`]*)`")
_FOLDER = re.compile(r"\(folder ([^)]+)\)")
_TOKEN = re.compile(r'"[^"]*"|\S+')


def show_models_banner(messages: MessageBar, banner: str) -> None:
    """`banner` on show, once, as the one models banner: an older one names files downloaded since."""
    for shown in messages.texts():
        if shown.startswith(MODELS_BANNER) and shown != banner:
            messages.dismiss("warning", shown)
    if banner not in messages.texts():
        messages.show_message("warning", banner)


def drop_models_banner(messages: MessageBar) -> None:
    """The models are all there: no banner says otherwise."""
    for shown in messages.texts():
        if shown.startswith(MODELS_BANNER):
            messages.dismiss("warning", shown)


def models_banner(message: str, cwd: Path | None = None) -> str:
    """The banner for the models' message (paths made absolute against `cwd`, the app's folder)."""
    here = Path.cwd() if cwd is None else cwd
    many = _MISSING.match(message)
    if many:
        return (
            f"{MODELS_BANNER}models that are not downloaded yet: {many['files']} "
            f"(folder {absolute_path(many['folder'], here)}). "
            "Download them with Models… (above the preview, on the right)"
            ", or in a terminal: "
            f"`{absolute_command(many['command'], here)}`{many['about'] or ''}. "
            "They are used from the next Start."
        )
    one = _ONE_MISSING.match(message)
    if one:
        return (
            f"{MODELS_BANNER}a model that is not downloaded yet: {one['file']} "
            f"(folder {absolute_path(one['folder'], here)}). "
            "Download it with Models… (above the preview, on the right)"
            ", or in a terminal: "
            f"`{absolute_command(one['command'], here)}`, or put the file in that folder. "
            "It is used from the next Start."
        )
    # Another problem (a damaged file, or one beside missing ones): its own words, after a sentence
    # that says what it stops, with its paths absolute and the command line's "then again" gone.
    fixed = _COMMAND.sub(lambda m: f"`{absolute_command(m[1], here)}`", message)
    fixed = _FOLDER.sub(lambda m: f"(folder {absolute_path(m[1], here)})", fixed)
    fixed = fixed.replace(", then again;", ";")
    # The panel has no --allow-unverified: its Models dialog has the switch.
    fixed = fixed.replace(
        "or pass --allow-unverified to use it anyway", "or allow unverified files in Models…"
    )
    return f"{MODELS_BANNER}the face models. {fixed}"


def absolute_command(command: str, cwd: Path, platform: str = sys.platform) -> str:
    """`command` with the interpreter, the script and `--models-dir` as absolute paths."""
    # PowerShell's `&` belongs before the program only: one before main.py breaks the command.
    tokens = [t for i, t in enumerate(_TOKEN.findall(command)) if t != "&" or i == 0]
    program = [i for i, token in enumerate(tokens) if token != "&"][:2]  # interpreter, main.py
    for i in program:
        if (cwd / _unquoted(tokens[i])).exists():  # (not an option such as -m)
            tokens[i] = _absolute_arg(tokens[i], cwd)
    for i, token in enumerate(tokens[:-1]):
        if token == "--models-dir":
            tokens[i + 1] = _absolute_arg(tokens[i + 1], cwd)
    if platform == "win32" and program[:1] == [0] and tokens[0].startswith('"'):
        tokens.insert(0, "&")  # PowerShell runs a quoted program only after `&`
    return " ".join(tokens)


def absolute_path(text: str, cwd: Path) -> str:
    return text if Path(text).is_absolute() else os.path.normpath(cwd / text)


def _unquoted(token: str) -> str:
    return token[1:-1] if len(token) > 1 and token[0] == token[-1] == '"' else token


def _absolute_arg(token: str, cwd: Path) -> str:
    text = absolute_path(_unquoted(token), cwd)
    return f'"{text}"' if " " in text else text
