"""The control panel's log file: what a user can send when something went wrong, without a terminal."""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

import platformdirs

LOG_NAME = "facecast.log"
MAX_BYTES = 2_000_000
BACKUPS = 3  # facecast.log.1 … .3: a few runs back, a few MB in all


def default_log_dir() -> Path:
    return Path(platformdirs.user_log_dir("FaceCast"))


def install_log_file(
    folder: Path | None = None, max_bytes: int = MAX_BYTES, logger: logging.Logger | None = None
) -> Path | None:
    """Log INFO and above to <user log folder>/facecast.log, rotating; the path, or None when the
    folder cannot be written (the app runs on, logging to stderr only)."""
    path = (folder or default_log_dir()) / LOG_NAME
    target = logger or logging.getLogger()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=BACKUPS, encoding="utf-8")
    except OSError as exc:
        logging.getLogger(__name__).warning("Cannot write the log file %s: %s", path, exc)
        return None
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    target.addHandler(handler)
    if target.level == logging.NOTSET or target.level > logging.INFO:
        target.setLevel(logging.INFO)
    return path
