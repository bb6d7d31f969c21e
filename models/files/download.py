"""Fetch catalogue models: licence gate, resumable streaming, mirrors, SHA-256 check, atomic install.

A file only ever appears under its final name after its size and hash were checked; until then it lives
in `<name>.part`, which a later run resumes with an HTTP Range request.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol, TextIO

import requests
import urllib3
from tqdm import tqdm

from models.errors import DownloadError, LicenceNotAcceptedError
from models.files.catalogue import ModelEntry, ModelFile, get_entry
from models.files.folder_lock import FolderLock
from models.files.store import (
    ModelStore,
    crc32_file,
    download_command,
    parses_as_onnx,
    read_json_dict,
    sha256_file,
    write_json_atomic,
)

log = logging.getLogger(__name__)

LICENCES_FILE = ".licences.json"
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)")
_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
# What a dropped or refused connection looks like through requests/urllib3 (RequestException is an OSError).
_NETWORK_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


class HttpResponse(Protocol):
    """The part of requests.Response the downloader uses (stream=True)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def iter_content(self, chunk_size: int) -> Iterator[bytes]: ...

    def close(self) -> None: ...


HttpGet = Callable[[str, Mapping[str, str], float], HttpResponse]
"""(url, request headers, timeout seconds) -> streaming response."""


def requests_get(url: str, headers: Mapping[str, str], timeout: float) -> HttpResponse:
    response: HttpResponse = requests.get(
        url, headers=dict(headers), timeout=timeout, stream=True, allow_redirects=True
    )
    return response


def write_chunk(fh: BinaryIO, data: bytes) -> None:
    """Every byte written to disk goes through here (one place for tests to simulate a full disk)."""
    fh.write(data)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def part_path(path: Path) -> Path:
    return path.with_name(path.name + ".part")


class _MirrorFailed(Exception):
    """This source cannot deliver the file now (HTTP error, refused, dropped); try the next one."""


class _BadContent(Exception):
    """This source delivered bytes that are not the file we want."""


@dataclass(frozen=True, slots=True)
class _Range:
    start: int | None
    total: int | None


def _parse_content_range(value: str | None) -> _Range:
    m = _CONTENT_RANGE.match(value or "")
    if not m:
        return _Range(None, None)
    start = int(m.group(1)) if m.group(1) is not None else None
    total = int(m.group(3)) if m.group(3) != "*" else None
    return _Range(start, total)


def _describe(exc: BaseException) -> str:
    """Short reason for a network error (requests wraps urllib3's MaxRetryError, whose .reason says it)."""
    inner = getattr(exc.args[0], "reason", None) if exc.args else None
    text = str(inner or exc)
    return text if len(text) <= 200 else text[:197] + "..."


def _content_length(headers: Mapping[str, str]) -> int | None:
    value = headers.get("Content-Length")
    return int(value) if value is not None and value.isdigit() else None


class Downloader:
    """Downloads catalogue entries into `store.models_dir`.

    `catalogue` defaults to the store's, so a test store with a fake catalogue needs nothing more.
    """

    def __init__(
        self,
        store: ModelStore,
        http_get: HttpGet | None = None,
        progress: bool = True,
        catalogue: Sequence[ModelEntry] | None = None,
        chunk_size: int = 1 << 16,
        timeout: float = 30.0,
        attempts_per_mirror: int = 3,
        retry_delay: float = 1.0,
    ) -> None:
        self.store = store
        self.http_get: HttpGet = http_get or requests_get
        self.progress = progress
        self.catalogue: tuple[ModelEntry, ...] = (
            tuple(catalogue) if catalogue is not None else store.catalogue
        )
        self.chunk_size = chunk_size
        self.timeout = timeout
        self.attempts_per_mirror = attempts_per_mirror
        self.retry_delay = retry_delay  # seconds before the 2nd attempt at a source, doubling after

    # ---- public -------------------------------------------------------------------------------------

    def download(self, entry_name: str, accept_licence: Callable[[ModelEntry], bool]) -> list[Path]:
        """Install every file of `entry_name`; returns their paths. Verified files are not fetched again.

        `accept_licence(entry)` is asked only the first time a licence is met; the answer is remembered.
        """
        entry = get_entry(entry_name, self.catalogue)
        for required in entry.requires:  # a swapper's embedding converter comes with it
            self.download(required, accept_licence)
        paths = [self.store.path_for(f.name) for f in entry.files]
        if not self._needed(entry):
            return paths
        folder = self.store.models_dir
        lock = FolderLock(folder, on_wait=lambda: self._say_waiting(entry))
        try:
            self._ensure_licence(entry, accept_licence)
            folder.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except OSError as exc:  # a read-only mount, a full disk, a file where the folder should be
            raise self._folder_error(exc) from exc
        try:
            needed = self._needed(entry)  # another process may have installed them while we waited
            if entry.archive and needed:
                # Everything this archive holds that any entry wants: det_10g and w600k_r50 both
                # come from buffalo_l.zip (~280 MB), which is fetched once, not once per file.
                self._download_archive(entry, self._missing_in_archive(entry.archive, needed))
            else:
                for spec in needed:
                    self._download_file(entry, spec)
        except OSError as exc:  # installing (rename, clean-up) in a folder that stopped taking writes
            raise self._folder_error(exc) from exc
        finally:
            lock.release()
        return paths

    def _needed(self, entry: ModelEntry) -> list[ModelFile]:
        return [f for f in entry.files if self.store.check(f).status not in ("ok", "unpinned")]

    def _say_waiting(self, entry: ModelEntry) -> None:
        log.warning(
            "Another download into %s is running; %s waits for it to finish (Ctrl+C to stop).",
            self.store.models_dir,
            entry.name,
        )

    def _missing_in_archive(self, archive: str, needed: list[ModelFile]) -> list[ModelFile]:
        wanted = {f.name: f for f in needed}
        for other in self.catalogue:
            if other.archive != archive:
                continue
            for spec in other.files:
                if spec.name not in wanted and self.store.check(spec).status not in ("ok", "unpinned"):
                    wanted[spec.name] = spec
        return list(wanted.values())

    def licence_accepted(self, licence: str) -> bool:
        return licence in read_json_dict(self.store.models_dir / LICENCES_FILE)

    # ---- licence ------------------------------------------------------------------------------------

    def _ensure_licence(self, entry: ModelEntry, accept: Callable[[ModelEntry], bool]) -> None:
        path = self.store.models_dir / LICENCES_FILE
        accepted = read_json_dict(path)
        if entry.licence in accepted:
            return
        if not accept(entry):
            raise LicenceNotAcceptedError(
                f"The licence of {entry.name} ({entry.licence}, {entry.licence_url}) was not accepted; "
                "nothing was downloaded.",
                hint=f"Run `{download_command(entry.name, self.store.models_dir)}` again and accept it "
                "(or add --yes, having read it).",
            )
        accepted[entry.licence] = {
            "licence_url": entry.licence_url,
            "accepted_for": entry.name,
            "accepted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self.store.models_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, accepted)

    # ---- single files -------------------------------------------------------------------------------

    def _download_file(self, entry: ModelEntry, spec: ModelFile) -> Path:
        final = self.store.path_for(spec.name)
        part = part_path(final)
        notes: list[str] = []
        fetched_crc = None
        if spec.sha256 is None and self.store.expected_crc32(spec) is None:
            fetched_crc = self._publisher_crc32(spec)
        crc = self.store.expected_crc32(spec) or fetched_crc
        for url in entry.urls:

            def check(p: Path, spec: ModelFile = spec) -> None:
                size = p.stat().st_size
                if spec.size is not None and size != spec.size:
                    raise _BadContent(f"wrong size (expected {spec.size:,} bytes, got {size:,})")
                if spec.sha256 is not None:
                    actual = sha256_file(p)
                    if actual != spec.sha256:
                        raise _BadContent(f"wrong SHA-256 (got {actual})")
                elif crc is not None:
                    got = crc32_file(p)
                    if got != crc:
                        raise _BadContent(f"wrong CRC-32 (the publisher's is {crc}, got {got})")
                else:  # no hash to check against: at least it must be a whole ONNX model
                    readable, why = parses_as_onnx(p)
                    if not readable:
                        raise _BadContent(why)

            try:
                self._fetch_checked(url, part, spec.size, spec.name, check)
            except _MirrorFailed as exc:
                notes.append(f"{url}: {exc}")
                log.warning("Download of %s from %s failed: %s", spec.name, url, exc)
                continue
            os.replace(part, final)
            if spec.sha256 is not None:
                self.store.record_hash(final, spec.sha256)
            if fetched_crc is not None:
                self.store.record_publisher_crc32(spec.name, fetched_crc)
            return final
        raise self._all_failed(entry, [spec], notes)

    def _publisher_crc32(self, spec: ModelFile) -> str | None:
        """The CRC-32 the publisher lists beside the file (its NAME.hash), or None (then the file is
        only checked to be a whole ONNX model, said in the log)."""
        for url in spec.crc32_urls:
            try:
                response = self.http_get(url, {}, self.timeout)
                try:
                    if response.status_code != 200:
                        continue
                    body = b"".join(response.iter_content(64))[:64].decode("ascii", "replace").strip()
                finally:
                    response.close()
            except (*_NETWORK_ERRORS, ValueError) as exc:
                log.info("Cannot read the publisher's checksum %s (%s)", url, exc)
                continue
            if len(body) == 8 and all(c in "0123456789abcdef" for c in body.lower()):
                return body.lower()
            log.info("The publisher's checksum %s is not a CRC-32: %r", url, body[:20])
        if spec.crc32_urls:
            log.warning("No publisher's CRC-32 for %s could be read; it is checked as ONNX only.", spec.name)
        return None

    # ---- archives -----------------------------------------------------------------------------------

    def _download_archive(self, entry: ModelEntry, needed: list[ModelFile]) -> None:
        assert entry.archive is not None
        part = part_path(self.store.path_for(entry.archive))
        notes: list[str] = []
        for url in entry.urls:
            try:
                self._fetch_checked(
                    url, part, None, entry.archive, lambda p: self._extract_members(p, needed)
                )
            except _MirrorFailed as exc:
                notes.append(f"{url}: {exc}")
                log.warning("Download of %s from %s failed: %s", entry.archive, url, exc)
                continue
            part.unlink()  # members are in place; the archive is no longer needed
            return
        raise self._all_failed(entry, needed, notes)

    def _extract_members(self, archive: Path, members: list[ModelFile]) -> None:
        """Extract `members` (matched by basename anywhere in the zip), verify each, then install all.

        Nothing is installed unless every member verifies, and no `.part` is left behind on failure.
        """
        try:
            zf = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError) as exc:
            raise _BadContent(f"not a valid zip ({exc})") from exc
        parts: list[Path] = []
        try:
            with zf:
                by_base: dict[str, zipfile.ZipInfo] = {}
                for info in zf.infolist():
                    if not info.is_dir():
                        by_base.setdefault(PurePosixPath(info.filename).name, info)
                absent = [m.name for m in members if m.name not in by_base]
                if absent:
                    raise _BadContent(f"archive lacks {', '.join(absent)}")
                for spec in members:
                    part = part_path(self.store.path_for(spec.name))
                    parts.append(part)
                    self._extract_one(zf, by_base[spec.name], part, spec)
            for spec, part in zip(members, parts, strict=True):
                final = self.store.path_for(spec.name)
                os.replace(part, final)
                if spec.sha256 is not None:
                    self.store.record_hash(final, spec.sha256)
        finally:
            for part in parts:
                part.unlink(missing_ok=True)

    def _extract_one(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, part: Path, spec: ModelFile) -> None:
        digest = hashlib.sha256()
        size = 0
        try:
            with zf.open(info) as src, part.open("wb") as dst:
                while chunk := src.read(self.chunk_size):
                    digest.update(chunk)
                    size += len(chunk)
                    try:
                        write_chunk(dst, chunk)
                    except OSError as exc:
                        raise self._disk_error(exc, spec.name, part, keep_part=False) from exc
        except zipfile.BadZipFile as exc:  # e.g. CRC mismatch inside the archive
            raise _BadContent(f"member {info.filename} is corrupt ({exc})") from exc
        if spec.size is not None and size != spec.size:
            raise _BadContent(f"member {spec.name} has {size:,} bytes, expected {spec.size:,}")
        if spec.sha256 is not None and digest.hexdigest() != spec.sha256:
            raise _BadContent(
                f"member {spec.name} has the wrong SHA-256 (expected {spec.sha256}, got {digest.hexdigest()})"
            )

    # ---- transfer -----------------------------------------------------------------------------------

    def _fetch_checked(
        self, url: str, part: Path, size: int | None, label: str, check: Callable[[Path], None]
    ) -> None:
        """Fetch `url` into `part` and run `check` on it; _MirrorFailed if this source is no good."""
        fresh = False
        while True:
            resumed = self._fetch(url, part, size, label, fresh)
            try:
                check(part)
                return
            except _BadContent as exc:
                part.unlink(missing_ok=True)
                if resumed and not fresh:
                    # The bad bytes may be an old .part from elsewhere; give this source one clean try.
                    log.info("%s from %s failed its check after resuming (%s); refetching", label, url, exc)
                    fresh = True
                    continue
                raise _MirrorFailed(f"{exc}; skipped") from exc

    def _fetch(self, url: str, part: Path, size: int | None, label: str, fresh: bool) -> bool:
        """Bring `part` to the full content of `url`, resuming what is there. Returns whether it resumed."""
        if fresh:
            part.unlink(missing_ok=True)
        resumed = False
        for attempt in range(self.attempts_per_mirror):
            if attempt:
                time.sleep(self.retry_delay * 2 ** (attempt - 1))  # a hiccup passes; do not hammer
            offset = part.stat().st_size if part.exists() else 0
            if size is not None and offset > size:
                part.unlink()
                offset = 0
            if size is not None and offset == size:
                return True
            headers = {"Accept-Encoding": "identity"}  # byte ranges must address the raw file
            if offset:
                headers["Range"] = f"bytes={offset}-"
            last_try = attempt == self.attempts_per_mirror - 1
            try:
                response = self.http_get(url, headers, self.timeout)
            except _NETWORK_ERRORS as exc:
                if last_try:
                    raise _MirrorFailed(f"cannot connect ({_describe(exc)})") from exc
                log.info("Cannot connect to %s (%s); trying again", url, _describe(exc))
                continue
            try:
                status = response.status_code
                content_range = _parse_content_range(response.headers.get("Content-Range"))
                if status == 416 and offset:
                    if content_range.total == offset:
                        return True  # the .part already holds the whole file
                    part.unlink()
                    continue
                if status == 206 and offset and content_range.start == offset:
                    append, total = True, content_range.total
                    resumed = True
                elif status == 206:
                    part.unlink(missing_ok=True)  # a range we did not ask for: start over
                    continue
                elif status == 200:
                    # No Range sent, or the server ignored it: the body is the whole file from byte 0.
                    append, offset, total = False, 0, _content_length(response.headers)
                elif (status >= 500 or status == 429) and not last_try:
                    log.info("%s answered HTTP %d; trying again", url, status)  # overloaded, restarting
                    continue
                else:
                    raise _MirrorFailed(f"HTTP {status}")
                if response.headers.get("Content-Type", "").lower().startswith("text/html"):
                    raise _MirrorFailed("serves a web page, not the file (a login or error page?)")
                if size is not None and total is not None and total != size:
                    raise _MirrorFailed(f"serves {total:,} bytes, expected {size:,}")
                try:
                    self._stream(response, part, append, offset, total, label)
                except _MirrorFailed:
                    if not last_try:
                        continue  # a dropped connection: resume from whatever arrived
                    raise
            finally:
                response.close()
            got = part.stat().st_size
            expected = size if size is not None else total
            if expected is None or got >= expected:
                return resumed
            # The body ended early without an error; resume on the next attempt.
        raise _MirrorFailed(f"transfer kept stopping early ({self.attempts_per_mirror} attempts)")

    def _stream(
        self, response: HttpResponse, part: Path, append: bool, offset: int, total: int | None, label: str
    ) -> None:
        chunks = response.iter_content(self.chunk_size)
        try:
            fh = part.open("ab" if append else "wb")
        except OSError as exc:  # a read-only folder whose licence was accepted earlier
            raise self._disk_error(exc, label, part, keep_part=True) from exc
        written = False
        try:
            with tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=label,
                # A bar redrawn with \r turns a log file into one endless line.
                disable=not self.progress or not _is_terminal(sys.stderr),
                leave=False,
            ) as bar:
                while True:
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        break
                    except _NETWORK_ERRORS as exc:
                        raise _MirrorFailed(f"connection dropped ({_describe(exc)})") from exc
                    if not chunk:
                        continue
                    try:
                        write_chunk(fh, chunk)
                    except OSError as exc:
                        raise self._disk_error(exc, label, part, keep_part=True) from exc
                    bar.update(len(chunk))
            written = True
        finally:
            # Closing flushes what is buffered, which can fail again on a full disk: that must
            # neither hide the first error nor escape as a bare OSError.
            try:
                fh.close()
            except OSError as exc:
                if written:
                    raise self._disk_error(exc, label, part, keep_part=True) from exc
                log.debug("Closing %s after a failed transfer: %s", part, exc)

    # ---- errors -------------------------------------------------------------------------------------

    def _folder_error(self, exc: OSError) -> DownloadError:
        folder = self.store.models_dir
        hint = (
            "Set FACECAST_MODELS_DIR (or --models-dir) to a writable folder, or fix this one's permissions."
        )
        if exc.errno in _DISK_FULL:
            return DownloadError(f"The disk holding the models folder {folder} is full.", hint=hint)
        if folder.exists() and not folder.is_dir():
            return DownloadError(f"The models folder {folder} is a file, not a folder.", hint=hint)
        return DownloadError(
            f"Cannot write to the models folder {folder} ({exc.strerror or exc}).", hint=hint
        )

    def _disk_error(self, exc: OSError, label: str, part: Path, keep_part: bool) -> DownloadError:
        folder = self.store.models_dir
        if exc.errno in _DISK_FULL:
            kept = f"; the partial download is kept in {part.name} and will resume" if keep_part else ""
            return DownloadError(
                f"The disk holding {folder} is full while writing {label}{kept}.",
                hint="Free some space and run the download again.",
            )
        return DownloadError(
            f"Cannot write {label} to {folder} ({exc.strerror or exc}).",
            hint="Check the folder's permissions, or set FACECAST_MODELS_DIR to a writable folder.",
        )

    def _all_failed(self, entry: ModelEntry, files: list[ModelFile], notes: list[str]) -> DownloadError:
        folder = self.store.models_dir
        what = ", ".join(f"{f.name} (sha256 {f.sha256 or 'not published'})" for f in files)
        source = f" from {entry.archive}" if entry.archive else ""
        reasons = "; ".join(notes) if notes else "no sources listed"
        return DownloadError(
            f"Could not download {what}{source} into {folder}: {reasons}.",
            hint=(
                f"Check your connection and run `{download_command(entry.name, folder)}` again, or "
                "fetch it from "
                f"{entry.urls[0] if entry.urls else 'its publisher'} yourself and put "
                f"{', '.join(f.name for f in files)} in {folder}."
            ),
        )
