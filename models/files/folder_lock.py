"""One download into a models folder at a time, across processes.

Two `models download` runs into one folder (two terminals, a script and a user) would write the same
`.part` files: one truncates what the other appends to, and both fail. The lock is an OS file
lock on `<folder>/.download.lock`, released by the OS if the holder dies; the file itself stays
(deleting a lock file races with the next process opening it).
"""

from __future__ import annotations

import errno
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

LOCK_FILE = ".download.lock"
_NO_LOCKING = {errno.ENOLCK, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}
log = logging.getLogger(__name__)


def _try_lock(fh: IO[bytes]) -> bool:
    """Take the exclusive lock without waiting; False when another process holds it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as err:
        if err.errno not in _NO_LOCKING:
            raise
        # A network or FUSE folder without file locks: go on unlocked rather than call the folder
        # unwritable.
        log.warning("The models folder cannot be locked (%s); two downloads at once could clash.", err)
    return True


def _unlock(fh: IO[bytes]) -> None:
    if sys.platform == "win32":
        import msvcrt

        fh.seek(0)
        msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError as err:  # never locked (a folder without locks)
            log.debug("Unlocking %s: %s", fh.name, err)


class FolderLock:
    """`with FolderLock(folder, on_wait):` holds the folder's download lock. `on_wait()` is called
    once if another process holds it; the wait polls, so Ctrl+C stops it on every platform."""

    def __init__(self, folder: Path, on_wait: Callable[[], None] | None = None, poll_s: float = 0.25) -> None:
        self.path = Path(folder) / LOCK_FILE
        self.on_wait = on_wait
        self.poll_s = poll_s
        self._fh: IO[bytes] | None = None

    def acquire(self) -> None:
        """Raises OSError when the lock file cannot be created (a read-only folder)."""
        fh = open(self.path, "a+b")  # noqa: SIM115 - held open for as long as the lock is
        try:
            if not _try_lock(fh):
                if self.on_wait is not None:
                    self.on_wait()
                while not _try_lock(fh):
                    time.sleep(self.poll_s)
        except BaseException:
            fh.close()
            raise
        self._fh = fh

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            _unlock(fh)
        finally:
            fh.close()

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
