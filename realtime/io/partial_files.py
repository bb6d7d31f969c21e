"""Partial files: a recording is written under a hidden name next to its target and renamed into
place when it is finished; what a crash leaves behind is recovered by the next recording."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import struct
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


def _partial_path(path: Path, marker: str = "partial") -> Path:
    """A new hidden temp name in the target's own folder (same file system, so the rename is
    atomic), this writer's own: `.NAME.PID-TAG.partial.EXT` (two recordings of one name, in one
    process or two, must not share, nor take over, a partial file). The real extension stays last
    because the muxer is chosen from it."""
    return path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.{marker}{path.suffix}")


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


def _stale_partials(path: Path, marker: str = "partial") -> list[Path]:
    """Partial files of `path` (`.NAME.PID-TAG.MARKER.EXT`, or the older `.NAME.partial.EXT`)
    whose writer is gone (see PartialLock)."""
    legacy = f".{path.stem}.partial{path.suffix}"
    prefix, suffix = f".{path.stem}.", f".{marker}{path.suffix}"
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
ASSEMBLING = "assembling"  # the marker of a file job's output while its chunks are joined


def remove_stale_partials(path: Path) -> None:
    """Before a file job writes `path` again (a resume): what an earlier run killed while joining
    its chunks left beside it holds nothing the chunks do not, and an empty partial file of a
    recording holds nothing at all. Both go; a recording's partial with frames in it is left for
    the next recording to recover, and a writer still at work is left alone."""
    stale = _stale_partials(path, ASSEMBLING)
    stale += [p for p in _stale_partials(path) if _size(p) < _EMPTY_PARTIAL_BYTES]
    for entry in stale:
        _remove(entry)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _free_name(path: Path) -> Path:
    """`path`, or the first of `NAME-2.EXT`, `NAME-3.EXT`, ... that does not exist."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


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


class PartialFile:
    """One output file's life on disk, the same for every file sink (CPU or NVENC encoded): it is
    written under a hidden partial name (`temp`) that this writer locks; what a crash left of an
    earlier writer is recovered first; the finished file takes its name by one rename, keeping a
    file that appeared meanwhile (final_path); and its end is checked for a cut (a full disk)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temp = _partial_path(path)
        self._lock: PartialLock | None = None
        self._existed = False
        self._kept_in_temp = False  # a failed write left the recording in `temp` (see keep_cut)

    @property
    def container_options(self) -> dict[str, str]:
        return _container_options(self.path)

    @property
    def survives_truncation(self) -> bool:
        return _survives_truncation(self.path)

    def begin(self, new_take: bool = False) -> Path:
        """Recover what a crash left, prove the folder writable, lock a new partial file: its path.
        `new_take`: never replace a file; `NAME-2.EXT`, `NAME-3.EXT`, ... when the name is taken
        (every Start of the panel's recording is a take of its own). Raises SinkError when the
        folder cannot be read or written."""
        try:
            if new_take:
                self.path = _free_name(self.path)
            self._existed = self.path.exists()
        except OSError as err:  # a folder we may not look into (Path.exists raises EACCES)
            raise SinkError(f"Cannot write output {self.path} ({_reason(err)}).") from err
        _recover_partial(self.path)
        self._kept_in_temp = False
        self.temp = _partial_path(self.path)
        _prepare_target(self.path, self.temp)
        self._lock = PartialLock(self.temp)
        return self.temp

    def finish(self) -> Path:
        """The finished partial file into place (an OSError is raised as it is): its final path."""
        target = final_path(self.path, self._existed)
        os.replace(self.temp, target)
        self.path = target
        self._release()
        return target

    def check_end(self) -> None:
        """After finish(): a SinkError when the file's end may be cut. The muxer writes the last
        fragment while it closes and PyAV does not raise a failed write there."""
        if end_may_be_cut(self.path):
            raise SinkError(
                f"The disk holding {self.path} is full: the last seconds of the recording may be cut.",
                hint="Free some space before the next recording, or record to another drive.",
            )

    def keep_cut(self, err: BaseException) -> SinkError:
        """A write failed midway (a full disk) in a container readable without its ending: what
        it holds takes the file's name; the error to raise says where the recording is."""
        try:
            self.finish()
        except OSError as move_err:
            log.warning("Could not move %s to %s: %s", self.temp, self.path, move_err)
            self._kept_in_temp = True  # the message says the recording is in it: discard() keeps it
            return _write_error(self.temp, err, kept=True)
        return _write_error(self.path, err, kept=True)

    def discard(self) -> None:
        self._release()
        if not self._kept_in_temp:
            _remove(self.temp)

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


def end_may_be_cut(path: Path) -> bool:
    """Whether a finished file's end may be missing. A fragmented MP4/MOV says it exactly: its
    top-level boxes must fill the file (a write cut short leaves the last one's declared size past
    the end). Whatever the container, a disk with no block left may have refused the last write
    whole. (A disk with a little room left is not a sign: a recording that fit leaves that.)"""
    if path.suffix.lower() in _FRAGMENTED and _boxes_cut(path):
        return True
    return _no_space_left(path.parent)


def _boxes_cut(path: Path) -> bool:
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            at = 0
            while at < size:
                handle.seek(at)
                header = handle.read(16)
                if len(header) < 8:
                    return True
                length = struct.unpack(">I", header[:4])[0]
                if length == 1:  # a 64-bit size follows the type
                    if len(header) < 16:
                        return True
                    length = struct.unpack(">Q", header[8:16])[0]
                elif length == 0:  # the box runs to the end of the file
                    return False
                if length < 8:
                    return True  # not a box: the file is damaged
                at += length
            return at != size
    except OSError as err:
        log.debug("Could not read the boxes of %s: %s", path, err)
        return False


def _no_space_left(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free == 0
    except OSError:
        return False


# Public names for the layers above, which write their own files the same way.
new_partial_path = _partial_path
