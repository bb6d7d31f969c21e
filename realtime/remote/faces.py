"""Uploaded source photos: checked before decoding, stored under random ids, deleted with their stream.

No part of a request becomes part of a path: a face's file name is its id, made here, and an id
that comes back in a request is looked up in memory, never joined to a folder.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from realtime.api import ImageBGR, picture_size
from realtime.remote.limits import Limits


class UploadRefused(Exception):
    """An upload the server will not keep; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, refused_by: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.refused_by = refused_by  # "content": the content policy (the client's own exit code)


def png_or_jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) of an upload, from its header (the engine's one header reader), before
    anything is decoded (a small file can hold a huge picture); PNG and JPEG only."""
    found = picture_size(data)
    if found is None or found[0] not in ("png", "jpeg"):
        raise UploadRefused(415, "The photo must be a PNG or JPEG file.")
    return found[1], found[2]


@dataclass(frozen=True, slots=True)
class StoredFace:
    face_id: str
    path: Path
    sha256: str
    owner: str  # the token name that uploaded it: only that client may use it
    created: float


@dataclass
class FaceStore:
    folder: Path
    limits: Limits
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _faces: dict[str, StoredFace] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        # Faces left by a server that did not stop cleanly belong to sessions that are gone.
        for stale in self.folder.glob("*.png"):
            stale.unlink(missing_ok=True)

    def add(self, data: bytes, owner: str, screen: Callable[[ImageBGR], None] | None = None) -> StoredFace:
        """Keep the photo in `data`; `screen` sees the decoded picture first and may refuse it
        (UploadRefused): then nothing is kept."""
        if len(data) > self.limits.max_upload_bytes:
            raise UploadRefused(413, f"The photo is over {self.limits.max_upload_bytes} bytes.")
        if not data:
            raise UploadRefused(400, "The upload is empty: send the photo as the request body.")
        width, height = png_or_jpeg_size(data)
        if width <= 0 or height <= 0 or width * height > self.limits.max_upload_pixels:
            raise UploadRefused(
                413,
                f"The photo is {width}x{height}; the server takes up to "
                f"{self.limits.max_upload_pixels} pixels.",
            )
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise UploadRefused(400, "The photo could not be decoded.")
        if screen is not None:
            screen(np.asarray(image, np.uint8))
        face_id = secrets.token_hex(16)
        path = self.folder / f"{face_id}.png"
        # Stored as decoded and re-encoded: what is kept is a picture, whatever else the file held.
        if not cv2.imwrite(str(path), image):
            raise UploadRefused(500, "The server could not store the photo.")
        face = StoredFace(face_id, path, hashlib.sha256(data).hexdigest(), owner, time.monotonic())
        with self._lock:
            self._faces[face_id] = face
        return face

    def get(self, face_id: str, owner: str) -> StoredFace | None:
        with self._lock:
            face = self._faces.get(face_id)
        return face if face is not None and face.owner == owner else None

    def remove(self, face_id: str) -> None:
        with self._lock:
            face = self._faces.pop(face_id, None)
        if face is not None:
            face.path.unlink(missing_ok=True)

    def expire(self, older_than_s: float, keep: set[str]) -> int:
        """Delete faces no stream uses that were uploaded more than `older_than_s` ago."""
        now = time.monotonic()
        with self._lock:
            old = [
                f for f in self._faces.values() if now - f.created > older_than_s and f.face_id not in keep
            ]
        for face in old:
            self.remove(face.face_id)
        return len(old)

    def remove_all(self) -> None:
        with self._lock:
            ids = list(self._faces)
        for face_id in ids:
            self.remove(face_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._faces)
