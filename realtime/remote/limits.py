"""What one server allows: streams, their length and idle time, uploads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The server's content policy (realtime/remote/content_policy.py): what its classifier's verdicts do.
ContentMode = Literal["off", "log", "refuse"]
CONTENT_MODES: tuple[ContentMode, ...] = ("off", "log", "refuse")


@dataclass(frozen=True, slots=True)
class Limits:
    max_streams: int = 2
    max_session_s: float = 4 * 3600.0
    idle_s: float = 30.0  # no video in for this long: the stream is closed
    max_upload_bytes: int = 8 * 1024 * 1024
    max_upload_pixels: int = 4096 * 4096
    face_ttl_s: float = 300.0  # an uploaded face no stream has taken is deleted after this
    retry_after_s: int = 10  # what a 503 tells a client to wait
    max_faces_per_stream: int = 8


# Settings a client may not change: the server decides what runs on its GPU and how much of it.
SERVER_ONLY_SETTINGS = (
    "pipeline.provider",
    "pipeline.fp16",
    "pipeline.frames_in_flight",
    "pipeline.read_ahead",
)
