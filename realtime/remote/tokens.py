"""Bearer tokens from a file, re-read when it changes (editing the file revokes a token).

Each non-empty line that is not a comment is `name:token` or `name:sha256:HEX` (the token's
SHA-256, so the file need not hold the secret). Several lines, several clients.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class TokenEntry:
    name: str
    digest: str  # hex SHA-256 of the token


def parse_tokens(text: str) -> tuple[TokenEntry, ...]:
    entries: list[TokenEntry] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, rest = line.partition(":")
        if not sep or not name.strip() or not rest.strip():
            log.warning("token file line %d is not name:token; ignored", number)
            continue
        kind, sep2, digest = rest.partition(":")
        if sep2 and kind == "sha256" and len(digest) == 64:
            entries.append(TokenEntry(name.strip(), digest.lower()))
        else:
            entries.append(TokenEntry(name.strip(), hash_token(rest.strip())))
    return tuple(entries)


@dataclass
class TokenFile:
    """The tokens in `path`; `check` re-reads the file when its mtime or size changed."""

    path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stamp: tuple[int, int] | None = field(default=None, repr=False)
    _entries: tuple[TokenEntry, ...] = field(default=(), repr=False)

    def entries(self) -> tuple[TokenEntry, ...]:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            # A deleted file revokes every token: refusing is the safe reading.
            with self._lock:
                self._stamp, self._entries = None, ()
            return ()
        with self._lock:
            if stamp != self._stamp:
                self._entries = parse_tokens(self.path.read_text(encoding="utf-8"))
                self._stamp = stamp
            return self._entries

    def check(self, token: str) -> str | None:
        """The token's name, or None when no line matches."""
        digest = hash_token(token)
        found: str | None = None
        for entry in self.entries():
            # Compared in constant time, and over every line, so timing tells nothing.
            if hmac.compare_digest(entry.digest, digest):
                found = found or entry.name
        return found


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer T` header."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
