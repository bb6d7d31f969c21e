"""The user's confirmation of consent: asked once, by the control panel or the command line, and
kept in one file both read (consent.toml beside the panel's settings.toml).

The panel asks with a dialog on first run; `main.py run` asks in an interactive terminal, and a run
without one needs `--consent` or FACECAST_CONSENT=1. Once given, it is stored and not asked again.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import platformdirs

from models.errors import ExitCode, FaceCastError
from models.files.catalogue import CATALOGUE, get_entry

CONFIG_ENV = "FACECAST_CONFIG"  # the panel's settings file; consent.toml lives beside it
CONSENT_ENV = "FACECAST_CONSENT"
CONSENT_FILE = "consent.toml"
RECOGNITION_PACK = "buffalo_l"  # the detector and recogniser every swap needs

CONSENT_TEXT = (
    "I have the consent of every person whose face I use, and I will use the models only as their "
    "licences allow."
)


class ConsentRequiredError(FaceCastError):
    """No consent was given (or it was declined) for a run that needs it."""

    exit_code = ExitCode.NO_CONSENT


def settings_path() -> Path:
    """The panel's settings file: `$FACECAST_CONFIG` if set, else <user config dir>/FaceCast/settings.toml."""
    override = os.environ.get(CONFIG_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("FaceCast")) / "settings.toml"


def consent_path(settings: Path | None = None) -> Path:
    """Where the confirmation is kept: beside `settings` (default: the panel's settings file)."""
    return (settings if settings is not None else settings_path()).with_name(CONSENT_FILE)


def consent_recorded(path: Path | None = None) -> bool:
    """True once the confirmation was given and stored (an unreadable file counts as not given)."""
    path = path if path is not None else consent_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return data.get("accepted") is True


def record_consent(path: Path | None = None) -> None:
    """Store the confirmation (written whole, then renamed). Raises OSError if it cannot be."""
    path = path if path is not None else consent_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    text = CONSENT_TEXT.replace('"', "'")
    part.write_text(f'# FaceCast: the confirmation below was given.\naccepted = true\ntext = "{text}"\n')
    part.replace(path)


def licence_lines() -> list[str]:
    """One line per licence of the face models: the recognition pack, then the swappers and their
    converters grouped by licence (names, licence, where to read it), from the catalogue."""
    pack = get_entry(RECOGNITION_PACK)
    lines = [f"{pack.name} ({pack.description}): {pack.licence}. {pack.licence_url}"]
    grouped: dict[tuple[str, str], list[str]] = {}
    for entry in CATALOGUE:
        if entry.role in ("swapper", "converter"):
            grouped.setdefault((entry.licence, entry.licence_url), []).append(entry.name)
    lines += [f"{', '.join(names)}: {licence}. {url}" for (licence, url), names in grouped.items()]
    return lines


def ensure_consent(
    given: bool,
    stdin: TextIO,
    say: Callable[[str], None],
    path: Path | None = None,
    interactive: bool | None = None,
) -> None:
    """Return when consent is stored, given (`--consent`, FACECAST_CONSENT=1) or confirmed at the
    prompt of an interactive terminal; raise ConsentRequiredError otherwise. A confirmation given by
    flag or prompt is stored, so it is asked once (the environment variable is per run)."""
    path = path if path is not None else consent_path()
    if consent_recorded(path):
        return
    if os.environ.get(CONSENT_ENV, "").strip() == "1" and not given:
        return
    if not given:
        if interactive is None:
            interactive = _is_terminal(stdin)
        if not interactive:
            raise ConsentRequiredError(
                "FaceCast needs your confirmation of consent before its first run.",
                hint=f'Pass --consent (or set {CONSENT_ENV}=1) to confirm: "{CONSENT_TEXT}"',
            )
        say("Before the first run: FaceCast replaces a face in live video with the face from a photo.")
        say("Used without consent it can deceive and harm people. The face models' licences (most")
        say("allow non-commercial research only; each is shown again before its download):")
        for line in licence_lines():
            say(f"  - {line}")
        say('The output is marked "AI-modified" by default (--no-label removes it): tell those who see it.')
        say(CONSENT_TEXT)
        say("Type yes to confirm (anything else cancels): ")
        answer = stdin.readline().strip().lower()
        if answer not in ("yes", "y"):
            raise ConsentRequiredError("Cancelled: consent was not confirmed.", hint="Nothing was run.")
    try:
        record_consent(path)
    except OSError as exc:
        why = exc.strerror or exc
        say(f"note: the confirmation could not be stored in {path} ({why}); it will be asked again")


def _is_terminal(stream: TextIO) -> bool:
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return bool(stream.isatty())
    return False
