"""What a downloadable model is: its files (with the hashes that verify them) and its entry in the
catalogue (sources, licence, role). The catalogue itself is models.files.catalogue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal[
    "detector",
    "recognizer",
    "swapper",
    "converter",
    "landmarks",
    "enhancer",
    "occluder",
    "parser",
    "frame_enhancer",
    "content",
]


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One file on disk.

    sha256 / size: pinned here from the publisher's page (None: not published). crc32: the
    publisher's own CRC-32 (8 hex digits), checked where no SHA-256 is published: it catches a
    damaged or cut-off file, not a deliberate substitute. crc32_urls: where the publisher's CRC-32
    file lies beside the model (FaceFusion publishes NAME.hash), read at download time when the
    value is not pinned here and kept for later checks. approx_size: the publisher's rounded size
    in bytes, for display where the exact size is not pinned.
    """

    name: str
    sha256: str | None
    size: int | None
    crc32: str | None = None
    crc32_urls: tuple[str, ...] = ()
    approx_size: int | None = None

    @property
    def shown_size(self) -> int | None:
        """Bytes to show a user: the exact size, else the publisher's rounded one."""
        return self.size if self.size is not None else self.approx_size


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A downloadable model.

    `urls` are tried in order (primary first, then mirrors). When `archive` is set the URLs point at
    that archive and `files` are the members to extract from it (matched by basename).
    """

    name: str
    role: Role
    files: tuple[ModelFile, ...]
    urls: tuple[str, ...]
    archive: str | None
    licence: str
    licence_url: str
    description: str
    default: bool
    # Swappers: the family whose class feeds the model (models.wrappers.swappers.registry).
    family: str | None = None
    # Entries this one cannot run without (a swapper's embedding converter): downloaded with it.
    requires: tuple[str, ...] = ()

    @property
    def shown_size(self) -> int | None:
        """Bytes to show a user (exact where pinned, else the publisher's rounded sizes)."""
        sizes = [f.shown_size for f in self.files]
        if any(s is None for s in sizes):
            return None
        return sum(s for s in sizes if s is not None)

    @property
    def total_size(self) -> int | None:
        """Bytes on disk once installed, None if any file's size is unknown."""
        sizes = [f.size for f in self.files]
        if any(s is None for s in sizes):
            return None
        return sum(s for s in sizes if s is not None)

    def file(self, filename: str) -> ModelFile:
        for f in self.files:
            if f.name == filename:
                return f
        raise KeyError(filename)


__all__ = ["ModelEntry", "ModelFile", "Role"]
