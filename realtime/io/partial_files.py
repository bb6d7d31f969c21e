"""Partial files: a recording is written under a hidden name next to its target and renamed into
place when it is finished; what a crash leaves behind is recovered by the next recording."""

from __future__ import annotations

import errno
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows: a writer is known alive by its process id alone
    fcntl = None  # type: ignore[assignment]

from realtime.core.errors import SinkError

log = logging.getLogger(__name__)


def _partial_path(path: Path) -> Path:
    """A new hidden temp name in the target's own folder (same file system, so the rename is
    atomic), this writer's own: `.NAME.PID-TAG.partial.EXT` (two recordings of one name, in one
    process or two, must not share, nor take over, a partial file). The real extension stays last
    because the muxer is chosen from it."""
    return path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial{path.suffix}")


_PARTIAL_TAG = re.compile(r"\d+(-[0-9a-f]{8})?")  # PID-TAG, or PID alone (written before the tag)


def _prepare_target(path: Path, temp: Path) -> None:
    """Create the folder and prove the temp file can be written."""
    if path.is_dir():
        raise SinkError(f"Output {path} is a folder.", hint=f"Give a file name, e.g. {path / 'out.mp4'}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb"):
            pass  # only proving that a file can be created here; the writer fills it
    except OSError as err:
        raise SinkError(f"Cannot write output {path} ({_reason(err)}).") from err


def _write_error(path: Path, err: BaseException, *, kept: bool = False) -> SinkError:
    what = (
        "the recording stopped there; what was recorded is kept in it"
        if kept
        else "the partial file was removed"
    )
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return SinkError(
            f"Disk full while writing {path}; {what}.",
            hint="Free some space or write the output to another drive.",
        )
    return SinkError(f"Could not write {path} ({_reason(err)}); {what}.")


_FRAGMENTED = (".mp4", ".mov", ".m4v")  # written fragmented: readable without the muxer's ending
_STREAMABLE = (".mkv", ".ts")  # readable up to where they were cut by design


def _container_options(path: Path) -> dict[str, str]:
    """Muxer options: fragmented MP4/MOV, and every packet flushed to the file as it is muxed
    (with the default 32 KB buffer a crash lost the last packets, and a short file entirely)."""
    options = {"flush_packets": "1"}
    if path.suffix.lower() in _FRAGMENTED:
        options["movflags"] = "frag_keyframe+empty_moov+default_base_moof+negative_cts_offsets"
    return options


def _survives_truncation(path: Path) -> bool:
    return path.suffix.lower() in _FRAGMENTED + _STREAMABLE


class PartialLock:
    """A writer's claim on its partial file: an exclusive lock held on an open descriptor for as
    long as the writer lives. The kernel drops it when the process ends in any way (kill -9
    included), so the next recording knows at once that nobody writes the file any more."""

    def __init__(self, temp: Path) -> None:
        self._file: IO[bytes] | None = None
        try:
            handle = open(temp, "ab")  # noqa: SIM115 - held open for the writer's whole life
        except OSError as err:
            log.debug("No lock on %s: %s", temp, err)
            return
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:  # a file system without locks: the PID in the name still tells
                log.debug("Could not lock %s: %s", temp, err)
        self._file = handle

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()


def _writer_alive(entry: Path, tag: str) -> bool:
    """Whether a live writer still has `entry`: its lock is held. A file with no lock (a writer
    that takes none, such as NVENC's, or a file system without locks) counts as live while the
    process named in it runs and the file changed in the last few seconds."""
    if fcntl is not None:
        try:
            with open(entry, "ab") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                except OSError as err:
                    log.debug("Could not test the lock on %s: %s", entry, err)
                else:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        except OSError:
            return True  # cannot even open it: leave it alone
    if not _process_runs(int(tag.split("-", 1)[0]) if tag else 0):
        return False
    try:
        return time.time() - entry.stat().st_mtime < _UNLOCKED_STALE_S
    except OSError:
        return False


_UNLOCKED_STALE_S = 10.0  # an unlocked partial untouched this long has no writer (each frame writes)


def _process_runs(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _recover_partial(path: Path) -> None:
    """Hidden partial recordings left by a crash (or a kill) hold playable video for the
    containers that survive truncation: give them a visible name instead of leaving them hidden.
    Another FaceCast still writing one (it holds the file's lock) is left alone."""
    if not _survives_truncation(path):
        return
    for temp in _stale_partials(path):
        if _size(temp) < _EMPTY_PARTIAL_BYTES:
            # Killed before its first frame: only a header, nothing to keep. Left there, these
            # hidden files piled up for good.
            _remove(temp)
            continue
        n, target = 1, path.with_name(f"{path.stem}.recovered{path.suffix}")
        while target.exists():
            n += 1
            target = path.with_name(f"{path.stem}.recovered-{n}{path.suffix}")
        try:
            os.replace(temp, target)
        except OSError as err:
            log.warning("Could not keep the interrupted recording %s: %s", temp, err)
            continue
        log.warning("A recording that was interrupted earlier (%s) was kept as %s.", path.name, target)


def _stale_partials(path: Path) -> list[Path]:
    """Partial files of `path` (`.NAME.PID-TAG.partial.EXT`, or the older `.NAME.partial.EXT`)
    whose writer is gone (see PartialLock)."""
    legacy = f".{path.stem}.partial{path.suffix}"
    prefix, suffix = f".{path.stem}.", f".partial{path.suffix}"
    found: list[Path] = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        tag = name[len(prefix) : -len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else ""
        if not (name == legacy or _PARTIAL_TAG.fullmatch(tag)):
            continue
        if not entry.is_file() or _writer_alive(entry, tag if name != legacy else ""):
            continue
        found.append(entry)
    return sorted(found)


_EMPTY_PARTIAL_BYTES = 1024  # a container header with no frame in it is smaller


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def final_path(path: Path, existed: bool) -> Path:
    """Where a finished file goes: `path`, unless a file of that name appeared while this one was
    written (another FaceCast writing the same name): then `NAME-2.EXT`, ... — the other file is not
    replaced. (A file that was there when the writer opened, `existed`, is replaced, as asked.)"""
    if existed or not path.exists():
        return path
    n, target = 2, path.with_name(f"{path.stem}-2{path.suffix}")
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}-{n}{path.suffix}")
    log.warning("%s appeared while this output was written; it is kept as %s.", path, target)
    return target


def _reason(err: BaseException) -> str:
    return str(getattr(err, "strerror", None) or err)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.warning("Could not remove the partial file %s: %s", path, err)


# Public names for the layers above, which write their own files the same way.
new_partial_path = _partial_path
