"""A real, small file system for the tests of a full disk: a tmpfs of a given size, mounted where
the test says. Where the run may not mount one (not root, a container without the right), the
test is skipped with the reason."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PAGE = 4096  # tmpfs hands out space in pages


@contextmanager
def small_disk(folder: Path, size: int, *, read_only: bool = False) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    pages = max(1, -(-size // PAGE))
    options = f"size={pages * PAGE}" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def pages_for(size: int) -> int:
    """Bytes a file of `size` bytes takes on the small disk."""
    return -(-size // PAGE) * PAGE
