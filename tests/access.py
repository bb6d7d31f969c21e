"""Folders a program may not look into, for the tests of unreadable paths. Root may look into any
folder, so as root the program runs without that right (setpriv); the folder belongs to nobody."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def without_root_rights() -> list[str]:
    """A command prefix that runs a program as this user without the right to look into other
    users' folders ([] when this user is not root: it never had it)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a locked folder cannot be made")
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}"]


def lock(folder: Path) -> None:
    """Make `folder` one the programs started with without_root_rights() may not look into."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)  # nobody's
        folder.chmod(0o700)
    else:
        folder.chmod(0)


def unlock(folder: Path) -> None:
    folder.chmod(0o700)
    if os.geteuid() == 0:
        os.chown(folder, 0, 0)
