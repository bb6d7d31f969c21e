"""The identity to swap in: one or more photos of a person, embeddings averaged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from models.types import Detection, ImageBGR, SourceFace
from realtime.core.errors import NoFaceError, SourceError
from realtime.core.image_header import check_pixel_count
from realtime.face.model_api import FaceDetector, RawEmbedder, Recognizer

MIN_FACE_PX = 40
# The part of the first source photo kept for the swappers that take a picture of the source:
# the face box's centre +- this many box sides (an FFHQ crop spans about twice the box, and a
# rolled face a little more).
KEEP_AROUND_FACE = 1.5


@dataclass(frozen=True, slots=True)
class SourcePhoto:
    path: Path
    detection: Detection
    faces_found: int


@dataclass(frozen=True, slots=True)
class SourceIdentity:
    """The person to swap in: the averaged, L2-normalised ArcFace embedding, and what the other
    swap families take (`face`: the raw embedding and the first photo's face)."""

    embedding: npt.NDArray[np.float32]
    photos: tuple[SourcePhoto, ...]
    notes: tuple[str, ...] = field(default=())
    face: SourceFace | None = None

    @property
    def source_face(self) -> SourceFace:
        """What a swapper computes its identity tensor from."""
        return self.face if self.face is not None else SourceFace(self.embedding)


def read_image(path: Path, role: str = "source") -> ImageBGR:
    """cv2.imread that works with non-ASCII paths and says clearly why a file is unusable; the
    header's pixel count is checked before anything is decoded. `role` names the photo."""
    what = f"{role.capitalize()} photo"
    if not path.exists():
        raise SourceError(f"{what} {path} does not exist.", hint="Check the path.")
    if not path.is_file():
        raise SourceError(f"{what} {path} is not a file.")
    try:
        data = np.fromfile(str(path), dtype=np.uint8)
    except OSError as exc:
        raise SourceError(f"{what} {path} cannot be read: {exc.strerror}.") from exc
    check_pixel_count(path, data[: 1 << 20].tobytes(), what)
    try:
        image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    except cv2.error as exc:  # a header OpenCV refuses (its own size limit, a damaged file)
        raise SourceError(f"{what} {path} cannot be decoded: {str(exc).strip().splitlines()[-1]}.") from exc
    if image is None:
        raise SourceError(
            f"{what} {path} is not an image OpenCV can read.",
            hint="Use a JPEG, PNG, BMP or WebP photo.",
        )
    return np.asarray(image, dtype=np.uint8)


def pick_face(path: Path, faces: Sequence[Detection], role: str = "source") -> tuple[Detection, str | None]:
    """The largest face; `role` names the photo in messages ("source", "reference")."""
    if not faces:
        raise NoFaceError(
            f"No face found in {role} photo {path}.",
            hint="Use a photo where one face is clearly visible, frontal and well lit.",
        )
    largest = max(faces, key=lambda d: d.area)
    w = float(largest.box[2] - largest.box[0])
    if w < MIN_FACE_PX:
        raise NoFaceError(
            f"The face in {role} photo {path} is only {w:.0f} px wide.",
            hint=f"Use a photo where the face is at least {MIN_FACE_PX} px wide.",
        )
    note = None
    if len(faces) > 1:
        note = f"{path.name}: {len(faces)} faces found, using the largest."
    return largest, note


def load_identity(
    paths: Sequence[Path], detector: FaceDetector, recognizer: Recognizer, role: str = "source"
) -> SourceIdentity:
    """Detect, align and embed each photo; average the normalised embeddings. `role` names the
    photos in messages: a reference photo without a face was called a "source photo"."""
    if not paths:
        raise SourceError("No source photo given.", hint="Pass --source PHOTO [PHOTO ...].")
    photos: list[SourcePhoto] = []
    notes: list[str] = []
    embeddings: list[npt.NDArray[np.float32]] = []
    raws: list[npt.NDArray[np.float32]] = []
    kept: tuple[ImageBGR, npt.NDArray[np.float32]] | None = None
    raw_embedder = recognizer if isinstance(recognizer, RawEmbedder) else None
    for path in paths:
        image = read_image(Path(path), role)
        faces = detector.detect(image)
        face, note = pick_face(Path(path), faces, role)
        if note:
            notes.append(note)
        if raw_embedder is not None:
            raw = raw_embedder.embed_raw(image, face.kps)
            raws.append(raw)
            embeddings.append(_unit(raw))
        else:
            embeddings.append(recognizer.embed(image, face.kps))
        if kept is None:
            kept = face_region(image, face)
        photos.append(SourcePhoto(Path(path), face, len(faces)))
    mean = np.mean(np.stack(embeddings), axis=0)
    norm = float(np.linalg.norm(mean))
    if norm < 1e-6:
        raise SourceError("The source photos' faces cancel out; use photos of one person.")
    embedding = (mean / norm).astype(np.float32)
    raw_mean = np.mean(np.stack(raws), axis=0).astype(np.float32) if raws else None
    assert kept is not None
    face_data = SourceFace(embedding, raw_mean, kept[0], kept[1])
    return SourceIdentity(embedding, tuple(photos), tuple(notes), face_data)


def _unit(vec: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norm = float(np.linalg.norm(vec))
    if not np.isfinite(norm) or norm == 0.0:
        raise SourceError("The recogniser returned no usable embedding for a source photo.")
    return np.asarray(vec / np.float32(norm), dtype=np.float32)


def face_region(image: ImageBGR, face: Detection) -> tuple[ImageBGR, npt.NDArray[np.float32]]:
    """The part of `image` around `face` (KEEP_AROUND_FACE box sides each way, cut at the photo's
    edges) as its own array, and the face's landmarks in it: the swappers that take a picture of
    the source align it from these, without keeping the whole photo."""
    x1, y1, x2, y2 = (float(v) for v in face.box)
    side = max(x2 - x1, y2 - y1)
    cx, cy = (x1 + x2) / 2.0, (y1 + y2) / 2.0
    h, w = image.shape[:2]
    reach = KEEP_AROUND_FACE * side
    left, top = max(int(cx - reach), 0), max(int(cy - reach), 0)
    right, bottom = min(int(np.ceil(cx + reach)), w), min(int(np.ceil(cy + reach)), h)
    region = np.ascontiguousarray(image[top:bottom, left:right])
    kps = np.asarray(face.kps, dtype=np.float32).reshape(5, 2) - np.array([left, top], dtype=np.float32)
    return region, kps
