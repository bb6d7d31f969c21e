"""Where model files live on disk, and whether the ones there are the ones we expect.

Verification is SHA-256 against the catalogue; where a publisher gives no SHA-256 but its own
CRC-32 (FaceFusion's NAME.hash files), that CRC-32: pinned in the catalogue, or read from the
publisher at download time and kept in `<models_dir>/.publisher-crc32.json`. Hashing a 554 MB file
takes seconds, so results are cached in `<models_dir>/.verified.json`, keyed by file name and
invalidated by size or mtime_ns changing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

import platformdirs

from models.cli_text import app_command, shown_arg
from models.errors import ModelError, ModelHashError, ModelMissingError, ModelsFolderError
from models.files.catalogue import CATALOGUE, ModelEntry, ModelFile, entry_for_file

log = logging.getLogger(__name__)

MODELS_DIR_ENV = "FACECAST_MODELS_DIR"
VERIFIED_CACHE = ".verified.json"
PUBLISHER_CRC32 = ".publisher-crc32.json"  # CRC-32s read from their publishers at download time
_HASH_CHUNK = 1 << 20

# wrong_kind: the models folder is a file, or a folder stands where a model file should be.
Status = Literal["ok", "missing", "mismatch", "truncated", "unpinned", "corrupt", "wrong_kind", "unreadable"]


def default_models_dir() -> Path:
    """`$FACECAST_MODELS_DIR` if set, else the per-user cache folder (…/FaceCast/models)."""
    override = os.environ.get(MODELS_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("FaceCast")) / "models"


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def crc32_file(path: Path) -> str:
    """The CRC-32 of a file as 8 lower-case hex digits (zlib's, as FaceFusion's .hash files hold)."""
    crc = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return f"{crc & 0xFFFFFFFF:08x}"


def download_command(names: str, models_dir: Path | None = None) -> str:
    """`models download NAMES`, with `--models-dir` when the files belong elsewhere than the default
    folder (following a hint without it would fetch them into the wrong place)."""
    command = f"models download {names}"
    if models_dir is not None and not _same_folder(Path(models_dir), default_models_dir()):
        command += f" --models-dir {shown_arg(Path(models_dir))}"
    return app_command(command)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.expanduser().resolve() == b.expanduser().resolve()
    except OSError:
        return False


def parses_as_onnx(path: Path) -> tuple[bool, str]:
    """Whether `path` is a readable ONNX model file (its protobuf parses: not a web page, not cut
    short), with the reason when not. For files without a published hash, whose bytes cannot be
    checked otherwise."""
    import onnx  # lazy: the parser is only needed for unpinned files

    try:
        with path.open("rb") as fh:
            if fh.read(1) in (b"<", b""):
                return False, "it is a web page or empty, not a model"
        onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, ValueError, ... for a broken protobuf
        return False, f"it is not a readable ONNX model ({type(exc).__name__})"
    return True, ""


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON via a temp file + os.replace so a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json_dict(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; {} when absent or unreadable (callers treat it as 'nothing known')."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("Ignoring unreadable %s (%s)", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True, slots=True)
class VerifyResult:
    name: str
    path: Path
    status: Status
    detail: str


def _same_file(record: Any, st: os.stat_result) -> TypeGuard[dict[str, Any]]:
    """Whether a cache record describes the file as it is now (same size and mtime_ns)."""
    if not isinstance(record, dict):
        return False
    return record.get("size") == st.st_size and record.get("mtime_ns") == st.st_mtime_ns


class ModelStore:
    """The models folder. `resolve()` hands out only verified files (or unverified, if allowed)."""

    def __init__(
        self,
        models_dir: Path,
        allow_unverified: bool = False,
        catalogue: Sequence[ModelEntry] = CATALOGUE,
    ) -> None:
        self.models_dir = Path(models_dir).expanduser()  # "~/models" from a launcher or a quoted arg
        self.allow_unverified = allow_unverified
        self.catalogue: tuple[ModelEntry, ...] = tuple(catalogue)
        self._warned: set[Path] = set()  # unverified files already reported (once per store)
        # Files found to parse, by (path, size, mtime): a read-only folder cannot keep the result on
        # disk, and parsing a 340 MB model again at every check costs seconds.
        self._parsed: set[tuple[str, int, int]] = set()

    # ---- lookup -------------------------------------------------------------------------------------

    def folder_problem(self) -> str | None:
        """Why the models folder cannot hold models (it is a file), or None."""
        if self.models_dir.exists() and not self.models_dir.is_dir():
            return f"the models folder {self.models_dir} is a file, not a folder"
        return None

    def path_for(self, filename: str) -> Path:
        return self.models_dir / filename

    def entry_for(self, filename: str) -> ModelEntry:
        return entry_for_file(filename, self.catalogue)

    def _spec(self, name: str) -> ModelFile:
        """The file meant by an entry name or a file name."""
        for entry in self.catalogue:
            if entry.name == name:
                if len(entry.files) != 1:
                    files = ", ".join(f.name for f in entry.files)
                    raise ValueError(f"'{name}' holds several files ({files}); resolve one of them")
                return entry.files[0]
        return self.entry_for(name).file(name)  # raises ModelMissingError for unknown names

    # ---- hashing with cache -------------------------------------------------------------------------

    def _cache_path(self) -> Path:
        return self.models_dir / VERIFIED_CACHE

    def _cache_key(self, path: Path) -> str:
        # Files in the models folder are keyed by name (the folder can move); others by absolute path.
        return path.name if path.parent.resolve() == self.models_dir.resolve() else str(path.resolve())

    def _fallback_cache_path(self) -> Path:
        """Where the cache goes when the models folder is read-only (a shared or system folder):
        in the user's cache folder, one file per models folder. Without it every check hashed
        every model again (the control panel checks at start-up and at each Start: ~2 GB read)."""
        folder = hashlib.sha256(str(self.models_dir.resolve()).encode()).hexdigest()[:16]
        return Path(platformdirs.user_cache_dir("FaceCast")) / "verified" / f"{folder}.json"

    def _cached(self, path: Path, field: str) -> Any:
        """`field` of `path`'s cache record while its size and mtime_ns are unchanged, else None."""
        st = path.stat()
        key = self._cache_key(path)
        for cache_path in (self._cache_path(), self._fallback_cache_path()):
            hit = read_json_dict(cache_path).get(key)
            if _same_file(hit, st):
                value = hit.get(field)
                if value is not None:
                    return value
        return None

    def cached_sha256(self, path: Path, use_cache: bool = True) -> str:
        """SHA-256 of `path`, reusing the cached value while size and mtime_ns are unchanged
        (`use_cache=False`: hash the bytes again, e.g. for `models verify`, and refresh the cache)."""
        sha = self._cached(path, "sha256") if use_cache else None
        if isinstance(sha, str):
            return sha
        sha = sha256_file(path)
        self.record_hash(path, sha)
        return sha

    def cached_crc32(self, path: Path, use_cache: bool = True) -> str:
        """CRC-32 of `path`, cached like the SHA-256."""
        crc = self._cached(path, "crc32") if use_cache else None
        if isinstance(crc, str):
            return crc
        crc = crc32_file(path)
        self._record(path, {"crc32": crc})
        return crc

    def expected_crc32(self, spec: ModelFile) -> str | None:
        """The publisher's CRC-32 of `spec`: pinned in the catalogue, or read at download time."""
        if spec.crc32 is not None:
            return spec.crc32
        value = read_json_dict(self.models_dir / PUBLISHER_CRC32).get(spec.name)
        return value if isinstance(value, str) else None

    def record_publisher_crc32(self, filename: str, crc32: str) -> None:
        """Keep the CRC-32 a publisher gave for `filename` (checked at every later start)."""
        path = self.models_dir / PUBLISHER_CRC32
        known = read_json_dict(path)
        known[filename] = crc32
        write_json_atomic(path, known)

    def record_hash(self, path: Path, sha256: str) -> None:
        """Remember `path`'s hash (e.g. right after a verified download) for later starts."""
        self._record(path, {"sha256": sha256})

    def onnx_readable(self, path: Path, use_cache: bool = True) -> tuple[bool, str]:
        """parses_as_onnx(path), remembered like hashes (a 400 MB model takes seconds to parse)."""
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if use_cache and (key in self._parsed or self._cached(path, "onnx_ok") is True):
            return True, ""
        ok, why = parses_as_onnx(path)
        if ok:
            self._parsed.add(key)
            self._record(path, {"onnx_ok": True})
        return ok, why

    def _record(self, path: Path, fields: dict[str, Any]) -> None:
        st = path.stat()
        cache_path = self._cache_path()
        cache = read_json_dict(cache_path)
        key = self._cache_key(path)
        old = cache.get(key)
        keep = (
            old
            if isinstance(old, dict)
            and old.get("size") == st.st_size
            and old.get("mtime_ns") == st.st_mtime_ns
            else {}
        )
        cache[key] = {**keep, "size": st.st_size, "mtime_ns": st.st_mtime_ns, **fields}
        try:
            self.models_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(cache_path, cache)
        except OSError as exc:
            # A read-only models folder still works: the results go to the user's cache folder.
            fallback = self._fallback_cache_path()
            kept = read_json_dict(fallback)
            old = kept.get(key)
            kept[key] = {**(old if _same_file(old, st) else {}), **cache[key]}
            try:
                fallback.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(fallback, kept)
            except OSError as exc2:
                log.warning("Cannot write hash cache %s (%s) nor %s (%s)", cache_path, exc, fallback, exc2)
            else:
                log.debug("hash cache %s not writable (%s): kept in %s", cache_path, exc, fallback)

    # ---- verification -------------------------------------------------------------------------------

    def check(self, spec: ModelFile, hash_unpinned: bool = False, use_cache: bool = True) -> VerifyResult:
        """Status of one catalogue file on disk. Unpinned files (no published hash) must parse as
        ONNX ("corrupt" when not: a web page, a cut-off body) and are hashed only if `hash_unpinned`.
        `use_cache=False` reads every byte again instead of trusting the cached results. A folder
        or file that may not be read is "unreadable" (said as such, not as a damaged file)."""
        path = self.path_for(spec.name)
        try:
            return self._check(spec, path, hash_unpinned, use_cache)
        except OSError as exc:
            where = exc.filename or path
            return VerifyResult(spec.name, path, "unreadable", f"cannot read {where} ({exc.strerror or exc})")

    def _check(self, spec: ModelFile, path: Path, hash_unpinned: bool, use_cache: bool) -> VerifyResult:
        problem = self.folder_problem()
        if problem is not None:
            return VerifyResult(spec.name, path, "wrong_kind", problem)
        if path.is_dir():
            return VerifyResult(spec.name, path, "wrong_kind", f"{path} is a folder, not a file")
        if not path.is_file():
            if path.exists():  # a socket, a device: nothing that holds a model either
                return VerifyResult(spec.name, path, "wrong_kind", f"{path} is not a regular file")
            return VerifyResult(spec.name, path, "missing", f"not in {self.models_dir}")
        size = path.stat().st_size
        if spec.size is not None and size < spec.size:
            return VerifyResult(
                spec.name, path, "truncated", f"expected {spec.size:,} bytes, got {size:,} bytes"
            )
        if spec.size is not None and size > spec.size:
            return VerifyResult(
                spec.name, path, "mismatch", f"expected {spec.size:,} bytes, got {size:,} bytes"
            )
        if spec.sha256 is None:
            crc = self.expected_crc32(spec)
            if crc is not None:
                actual_crc = self.cached_crc32(path, use_cache)
                if actual_crc != crc:
                    why = f"expected the publisher's CRC-32 {crc}, got {actual_crc}"
                    return VerifyResult(spec.name, path, "mismatch", why)
                return VerifyResult(
                    spec.name, path, "ok", f"the publisher's CRC-32 {crc} (no SHA-256 is published)"
                )
            readable, why = self.onnx_readable(path, use_cache)
            if not readable:
                return VerifyResult(spec.name, path, "corrupt", why)
            detail = "no published hash"
            if hash_unpinned:
                detail += f"; sha256 {self.cached_sha256(path, use_cache)}"
            return VerifyResult(spec.name, path, "unpinned", detail)
        actual = self.cached_sha256(path, use_cache)
        if actual != spec.sha256:
            return VerifyResult(spec.name, path, "mismatch", f"expected sha256 {spec.sha256}, got {actual}")
        return VerifyResult(spec.name, path, "ok", f"sha256 {actual}")

    def resolve(self, name: str) -> Path:
        """Path of a verified model file, given an entry name ("inswapper_128") or a file name.

        Raises ModelMissingError / ModelHashError with a one-line message that says what to do.
        A file with the wrong hash is returned anyway when `allow_unverified` is set.
        """
        spec = self._spec(name)
        result = self.check(spec)
        fix = download_command(self.entry_for(spec.name).name, self.models_dir)
        if result.status == "wrong_kind":
            folder_hint = (
                f"Rename or remove that file, or pass --models-dir (or set {MODELS_DIR_ENV}) to a folder."
            )
            raise ModelsFolderError(
                f"Cannot use model {spec.name}: {result.detail}.",
                hint=folder_hint if self.folder_problem() else f"Remove it, then run `{fix}`.",
            )
        if result.status == "unreadable":
            raise ModelError(
                f"Cannot use model {spec.name}: {result.detail}.",
                hint="Let FaceCast read the models folder, or choose another one (--models-dir, or "
                "the panel's Models… dialog).",
            )
        if result.status == "missing":
            raise ModelMissingError(
                f"Model file {spec.name} (sha256 {spec.sha256 or 'not published'}) is missing "
                f"from {self.models_dir}.",
                hint=f"Run `{fix}`, or put the file in that folder.",
            )
        if result.status == "corrupt":  # cannot be used even when the user vouches for it
            raise ModelHashError(
                f"Model file {result.path} is damaged: {result.detail}.",
                hint=f"Delete it and run `{fix}`.",
            )
        if result.status in ("truncated", "mismatch") and self.allow_unverified:
            # The user vouches for a different file (a re-export, a test double); ONNX Runtime
            # still rejects one that is really cut short when the session is opened.
            if result.path not in self._warned:
                self._warned.add(result.path)
                log.warning("Using unverified model %s (%s)", result.path, result.detail)
            return result.path
        if result.status == "truncated":  # a download cut short, or a smaller file on purpose (a double)
            raise ModelHashError(
                f"Model file {result.path} is truncated: {result.detail}.",
                hint=f"Delete it and run `{fix}`, or pass --allow-unverified to use it anyway "
                "(a file meant to differ, such as the offline test doubles).",
            )
        if result.status == "mismatch":
            raise ModelHashError(
                f"Model file {result.path} does not match: {result.detail}.",
                hint=f"Delete it and run `{fix}`, or pass --allow-unverified to use it anyway.",
            )
        return result.path

    def resolve_entry(self, name: str) -> tuple[Path, ...]:
        """Verified paths of every file of an entry (e.g. the four files of buffalo_l)."""
        entry = next((e for e in self.catalogue if e.name == name), None)
        if entry is None:
            return (self.resolve(name),)
        return tuple(self.resolve(f.name) for f in entry.files)

    def resolve_user_file(self, path: Path) -> tuple[Path, str]:
        """Accept a model file the user points at by path; returns it and its sha256 for display."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise ModelMissingError(f"Model file {path} does not exist.", hint="Check the path.")
        return path, self.cached_sha256(path)

    def verify_all(self) -> list[VerifyResult]:
        """One result per distinct catalogue file (pack members listed once), every byte read again:
        a file changed without its size or time changing (bit rot, `cp -p`) must not pass."""
        seen: set[str] = set()
        results: list[VerifyResult] = []
        for entry in self.catalogue:
            for spec in entry.files:
                if spec.name not in seen:
                    seen.add(spec.name)
                    results.append(self.check(spec, hash_unpinned=True, use_cache=False))
        return results
