"""What a remote call is asked to do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RemoteOptions:
    url: str
    token: str
    photos: tuple[Path, ...]
    preset: str | None = None
    overrides: tuple[str, ...] = ()
    consent: bool = False
    pinned: str | None = None
    known_hosts: Path | None = None
    stale_s: float = 1.5  # nothing back for this long: the link is down
    reconnect_for_s: float = 120.0  # give up after this long without a link
    first_backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    duration_s: float | None = None  # stop a live input after this long (tests, the bench)
    # The video rate the call may use each way, in bit/s (--max-bitrate); None: what the picture's
    # size needs for a clean picture (realtime/remote/encoder.py), as the link allows.
    max_bitrate: int | None = None
