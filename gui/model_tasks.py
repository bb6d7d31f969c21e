"""Model downloads and checks for the Models dialog, one at a time on a background thread.

The engine's Downloader does the work (licence record, resume from `.part`, mirrors, SHA-256);
this module only watches its transfer, through the HTTP call it is given, to report progress and
to stop it: a cancelled download keeps its `.part`, which the next Download resumes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from PyQt6.QtCore import QObject, pyqtSignal

from realtime.api import (
    Downloader,
    FaceCastError,
    HttpGet,
    HttpResponse,
    ModelEntry,
    ModelStore,
    part_path,
    requests_get,
)

log = logging.getLogger(__name__)

# unverified: no published hash (the file parses as a model), or its hash differs and unverified
# files are allowed (the offline test doubles); different: its hash differs and they are not.
EntryStatus = Literal["missing", "verified", "unverified", "different", "damaged", "unreadable"]
PROGRESS_EVERY_S = 0.1  # a 554 MB download in 64 KiB chunks is ~8500 chunks: not a signal each
_BROKEN = ("corrupt", "wrong_kind")  # unusable whatever the user allows
_UNPUBLISHED = ("truncated", "mismatch")  # not the published bytes: used when unverified files are allowed


class DownloadCancelled(Exception):
    """Raised inside the transfer to stop it; not a network error, so the Downloader does not retry."""


@dataclass(frozen=True, slots=True)
class EntryState:
    """An entry's files on disk. kept_bytes: what a stopped download left to resume from."""

    name: str
    status: EntryStatus
    detail: str = ""
    kept_bytes: int = 0


CRC32_VERIFIED = "the publisher's CRC-32 matches (no SHA-256 is published)"


def entry_state(store: ModelStore, entry: ModelEntry, use_cache: bool = True) -> EntryState:
    """What the user needs to know of an entry's files (see EntryStatus)."""
    results = [store.check(spec, use_cache=use_cache) for spec in entry.files]
    for status in ("unreadable", *_BROKEN):
        found = [r for r in results if r.status == status]
        if found:
            kind: EntryStatus = "unreadable" if status == "unreadable" else "damaged"
            return EntryState(entry.name, kind, f"{found[0].name}: {found[0].detail}")
    other = [r for r in results if r.status in _UNPUBLISHED]
    if other and store.allow_unverified:
        why = f"{other[0].name} is not the published file ({other[0].detail})"
        return EntryState(entry.name, "unverified", f"{why}; used: unverified files are allowed")
    # Smaller than the published file: a download cut short, or another file on purpose (the
    # offline doubles); the same size with other bytes: damaged.
    smaller = [r for r in other if r.status == "truncated"]
    if smaller:
        return EntryState(
            entry.name, "different", f"{smaller[0].name} is not the published file ({smaller[0].detail})"
        )
    if other:
        return EntryState(entry.name, "damaged", f"{other[0].name}: {other[0].detail}")
    if any(r.status == "missing" for r in results):
        parts = [part_path(store.path_for(entry.archive))] if entry.archive else []
        parts += [part_path(store.path_for(spec.name)) for spec in entry.files]
        kept = sum(p.stat().st_size for p in parts if p.is_file())
        return EntryState(entry.name, "missing", kept_bytes=kept)
    if any(r.status == "unpinned" for r in results):
        return EntryState(entry.name, "unverified", "no published hash; the file parses as a model")
    # A file with no published SHA-256 passed its publisher's CRC-32: said as such, not as a SHA-256.
    by_crc = any("CRC-32" in r.detail for r in results)
    return EntryState(entry.name, "verified", CRC32_VERIFIED if by_crc else "")


class _WatchedResponse:
    """A response whose body reports its bytes and stops when cancelled."""

    def __init__(self, inner: HttpResponse, start: int, total: int | None, watch: _Watch, label: str) -> None:
        self._inner = inner
        self._start = start
        self._total = total
        self._watch = watch
        self._label = label

    @property
    def status_code(self) -> int:
        return self._inner.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._inner.headers

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        done = self._start
        self._watch.report(self._label, done, self._total, force=True)
        for chunk in self._inner.iter_content(chunk_size):
            self._watch.check()
            done += len(chunk)
            self._watch.report(self._label, done, self._total)
            yield chunk
        self._watch.report(self._label, done, self._total, force=True)

    def close(self) -> None:
        self._inner.close()


class _Watch:
    """The HttpGet handed to the Downloader: the real one, with progress and a stop."""

    def __init__(self, inner: HttpGet, on_progress: Callable[[str, int, int], None], label: str) -> None:
        self._inner = inner
        self._on_progress = on_progress
        self._label = label
        self.cancelled = threading.Event()
        self._last = 0.0

    def check(self) -> None:
        if self.cancelled.is_set():
            raise DownloadCancelled

    def report(self, label: str, done: int, total: int | None, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= PROGRESS_EVERY_S:
            self._last = now
            self._on_progress(label, done, -1 if total is None else total)

    def __call__(self, url: str, headers: Mapping[str, str], timeout: float) -> HttpResponse:
        self.check()
        response = self._inner(url, headers, timeout)
        offset = int(headers.get("Range", "bytes=0-")[6:].rstrip("-") or 0)
        start = offset if response.status_code == 206 else 0
        total: int | None = None
        content_range = response.headers.get("Content-Range", "")
        if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
            total = int(content_range.rsplit("/", 1)[1])
        elif response.headers.get("Content-Length", "").isdigit():
            total = start + int(response.headers["Content-Length"])
        return _WatchedResponse(response, start, total, self, self._label)


@dataclass(frozen=True, slots=True)
class DownloadTuning:
    """How downloads talk to the network (tests and the screenshots use a local server)."""

    http_get: HttpGet = requests_get
    chunk_size: int = 1 << 16
    timeout: float = 30.0
    attempts_per_mirror: int = 3
    retry_delay: float = 1.0


class ModelTasks(QObject):
    """Downloads, checks and status look-ups, one at a time off the GUI thread.

    progress(name, bytes done, total or -1); state(EntryState); failed(name, message);
    cancelled(name); busy_changed(name or "").
    """

    progress = pyqtSignal(str, int, int)
    state = pyqtSignal(object)
    failed = pyqtSignal(str, str)
    cancelled = pyqtSignal(str)
    busy_changed = pyqtSignal(str)

    def __init__(
        self,
        store: ModelStore,
        tuning: DownloadTuning | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._tuning = tuning or DownloadTuning()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="models")
        self._lock = threading.Lock()
        self._watch: _Watch | None = None
        self._pending: list[str] = []  # downloads queued behind the running job
        self._accepted: set[str] = set()  # licences accepted in the window, recorded by the download

    @property
    def store(self) -> ModelStore:
        return self._store

    @property
    def catalogue(self) -> Sequence[ModelEntry]:
        return self._store.catalogue

    def set_store(self, store: ModelStore) -> None:
        """Another models folder: used by the jobs submitted from now on."""
        with self._lock:
            self._store = store

    def licence_accepted(self, entry: ModelEntry) -> bool:
        if entry.licence in self._accepted:
            return True
        return Downloader(self._store, progress=False).licence_accepted(entry.licence)

    def accept_licence(self, entry: ModelEntry) -> None:
        """The user read and accepted it: the next download of this licence records it on disk."""
        self._accepted.add(entry.licence)

    def refresh(self, names: Sequence[str] | None = None, thorough: bool = False) -> None:
        """Each entry's state (thorough: every byte hashed again, for Verify)."""
        wanted = [e for e in self.catalogue if names is None or e.name in names]
        self._executor.submit(self._guarded, self._refresh, wanted, thorough)

    def download(self, name: str) -> None:
        with self._lock:
            if name in self._pending:
                return
            self._pending.append(name)
        self._executor.submit(self._guarded, self._download, name)

    def cancel(self) -> None:
        """Stop the running download (what arrived is kept and resumed later) and those queued."""
        with self._lock:
            dropped, self._pending = self._pending, []
            watch = self._watch
        if watch is not None:
            watch.cancelled.set()
        for name in dropped:
            self.cancelled.emit(name)

    def shutdown(self) -> None:
        self.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ---- worker thread -------------------------------------------------------------------------------

    def _guarded(self, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except RuntimeError as exc:  # the dialog was closed and deleted meanwhile
            log.debug("models job result dropped: %s", exc)
        except Exception:
            log.exception("a models job failed")

    def _refresh(self, entries: list[ModelEntry], thorough: bool) -> None:
        store = self._store
        for entry in entries:
            try:
                state = entry_state(store, entry, use_cache=not thorough)
            except OSError as exc:
                state = EntryState(entry.name, "unreadable", f"cannot read it ({exc.strerror or exc})")
            self.state.emit(state)

    def _download(self, name: str) -> None:
        with self._lock:
            if name not in self._pending:
                return  # cancelled while queued
            watch = _Watch(self._tuning.http_get, lambda _l, d, t: self.progress.emit(name, d, t), name)
            self._watch = watch
            store = self._store
        tuning = self._tuning
        downloader = Downloader(
            store,
            http_get=watch,
            progress=False,
            chunk_size=tuning.chunk_size,
            timeout=tuning.timeout,
            attempts_per_mirror=tuning.attempts_per_mirror,
            retry_delay=tuning.retry_delay,
        )
        self.busy_changed.emit(name)
        entry = next(e for e in store.catalogue if e.name == name)
        try:
            downloader.download(name, lambda e: e.licence in self._accepted)
        except DownloadCancelled:
            log.info("download of %s cancelled; the partial file is kept", name)
            self.cancelled.emit(name)
        except FaceCastError as exc:
            log.warning("download of %s failed: %s", name, exc.user_message())
            self.failed.emit(name, exc.user_message())
        finally:
            with self._lock:
                self._watch = None
                if name in self._pending:
                    self._pending.remove(name)
            self.busy_changed.emit("")
        self._refresh([entry], thorough=False)


def size_text(size: int | None, *, exact: bool = True) -> str:
    """ "76.3 MB"; "≈ 402.7 MB" for a publisher's rounded figure; "size unknown"."""
    if size is None:
        return "size unknown"
    text = f"{size / 1e3:,.0f} kB" if size < 100_000 else f"{size / 1e6:,.1f} MB"
    return text if exact else f"≈ {text}"
