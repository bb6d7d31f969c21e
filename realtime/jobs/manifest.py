"""A job's folder: its plan (manifest.json, written once, atomically), one file per finished chunk,
and a lock that says a process is working on it. A chunk is finished when its file exists: the
file appears by one rename, so a kill at any moment leaves it whole or absent."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

from realtime.api import job_names
from realtime.jobs.chunks import Chunk
from realtime.jobs.errors import JobBusyError

try:
    import fcntl
except ImportError:  # Windows: no lock; two runs of one job there are the user's to avoid
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1


@dataclass(frozen=True, slots=True)
class Manifest:
    input: str
    input_identity: str
    output: str
    settings_key: str  # what the output depends on besides the input (models, settings, photos)
    time_base: str
    chunks: tuple[Chunk, ...]
    expected_frames: int
    version: int = MANIFEST_VERSION
    # The watermark run id every chunk's frames carry and the output's C2PA manifest names, so a
    # job split over chunks, machines and resumes reads as one run. Plans written before it had
    # none: they get one derived from the plan, the same on every worker.
    run_id: str = ""

    @property
    def mark_id(self) -> str:
        if self.run_id:
            return self.run_id
        return hashlib.sha256(f"{self.input_identity}/{self.settings_key}".encode()).hexdigest()[:8]

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.time_base)

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=1)

    @staticmethod
    def from_json(text: str) -> Manifest:
        data: dict[str, Any] = json.loads(text)
        data["chunks"] = tuple(Chunk(**c) for c in data["chunks"])
        return Manifest(**data)


job_folder = job_names.job_folder  # where a job's plan and chunks are kept (shared with the server)


def write_atomically(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def read_manifest(folder: Path) -> Manifest | None:
    try:
        return Manifest.from_json((folder / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as err:
        log.warning("The job's manifest in %s cannot be read (%s); starting it afresh.", folder, err)
        return None


def done_chunks(folder: Path, manifest: Manifest) -> set[int]:
    return {c.index for c in manifest.chunks if (folder / c.name).is_file()}


def finished_chunk_files(folder: Path) -> list[Path]:
    """The chunk work files that are complete (a chunk being written is `chunk-N.writing.nut`)."""
    return sorted(p for p in folder.glob("chunk-*.nut") if ".writing" not in p.name)


def reset_folder(folder: Path) -> None:
    """Empty the folder of another job's files (the lock file stays: it is held)."""
    for entry in folder.iterdir():
        if entry.name == "lock":
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def remove_leftovers(folder: Path) -> None:
    """Work files of chunks cut by a crash: they are redone whole."""
    for entry in folder.iterdir():
        if ".writing" in entry.name or entry.name.endswith(".tmp"):
            entry.unlink(missing_ok=True)


class JobLock:
    """Held while a process works on a job folder; the kernel drops it when the process dies."""

    def __init__(self, folder: Path, shared: bool = False) -> None:
        self._file: IO[str] | None = None
        self._folder = folder
        self._shared = shared  # workers of one queued job hold it together

    def __enter__(self) -> JobLock:
        self._folder.mkdir(parents=True, exist_ok=True)
        handle = open(self._folder / "lock", "a+", encoding="utf-8")
        if fcntl is not None:
            mode = fcntl.LOCK_SH if self._shared else fcntl.LOCK_EX
            try:
                fcntl.flock(handle.fileno(), mode | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise JobBusyError(
                    f"Another FaceCast is working on this job ({self._folder}).",
                    hint="Wait for it to finish, or stop it first.",
                ) from None
        self._file = handle
        return self

    def __exit__(self, *_: object) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()
