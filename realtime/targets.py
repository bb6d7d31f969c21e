"""Which tracked faces get swapped, with the chosen target locked to its track id.

Peers choose the target afresh on every frame (Deep-Live-Cam's left-most face, FaceFusion's
"one" face), so the swap jumps to a background face as soon as someone else walks in, crosses
or leans closer (Deep-Live-Cam #1152). Here the choice is made once and then follows the track id
that realtime/tracker.py keeps stable through motion and short occlusions:

* "largest": the largest face at the moment of choosing; re-chosen only when the locked track is
  gone (the tracker dropped it) or has been lost for more than `max_missed` frames.
* "reference": the face whose identity embedding is within `threshold` cosine distance of the
  reference photo's. Embeddings are computed only when a track is new or re-detected after being
  lost, and cached per track id: never on every frame (ArcFace costs 6.3 GMACs a face).
* "all": every face.

Faces that are not selected are left alone (passed through unswapped) by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from realtime.tracker import TrackedFace

Embedding = npt.NDArray[np.float32]
EmbedFn = Callable[[TrackedFace], npt.ArrayLike]
TargetMode = Literal["largest", "all", "reference"]


@dataclass(slots=True)
class _Known:
    """What the selector remembers about one track id."""

    embedding: Embedding | None = None  # unit length
    distance: float = float("inf")  # cosine distance to the reference
    lost_frames: int = 0  # as last reported, to notice a re-detection


class TargetSelector:
    """Choose the faces to swap, keeping the chosen target locked to its track id.

    mode: "largest" | "all" | "reference".
    reference_embedding: the reference identity (required for "reference"; any length, any norm).
    threshold: largest cosine distance (1 - cosine similarity) that counts as the reference person.
    max_missed: frames a locked track may stay lost before another face may be chosen (use the
        tracker's TrackerSettings.max_missed).

    One selector per stream, called once per frame in order. Not thread-safe.
    """

    def __init__(
        self,
        mode: TargetMode,
        reference_embedding: npt.ArrayLike | None = None,
        threshold: float = 0.6,
        *,
        max_missed: int = 5,
    ) -> None:
        if mode not in ("largest", "all", "reference"):
            raise ValueError(f"target mode must be 'largest', 'all' or 'reference', got {mode!r}")
        if not 0.0 < threshold < 2.0:
            raise ValueError(f"threshold is a cosine distance in (0, 2), got {threshold}")
        self.mode: TargetMode = mode
        self.threshold = float(threshold)
        self.max_missed = int(max_missed)
        self._reference: Embedding | None = None
        if reference_embedding is not None:
            self._reference = _unit(reference_embedding)
        elif mode == "reference":
            raise ValueError("target mode 'reference' needs a reference embedding (a photo of the person)")
        self._locked: int | None = None
        self._known: dict[int, _Known] = {}
        self.embed_calls = 0  # for metrics and tests: how often the embedder really ran

    @property
    def locked_id(self) -> int | None:
        """The track id the swap is locked to ("largest" / "reference"), or None."""
        return self._locked

    def unlock(self) -> None:
        """Forget the chosen target (the user asked to pick again)."""
        self._locked = None

    def select(self, faces: list[TrackedFace], embed: EmbedFn) -> list[TrackedFace]:
        """The faces to swap this frame, a subset of `faces` in their order.

        `embed(face)` returns the face's identity embedding (e.g. ArcFace on its aligned crop); it
        is called only in "reference" mode, once per new or re-detected track. The embedding is also
        stored on `face.embedding` for every face the selector knows it for.
        """
        present = {face.track_id for face in faces}
        for gone in [tid for tid in self._known if tid not in present]:
            del self._known[gone]  # ids are never reused: nothing to remember them for

        if self.mode == "all":
            return list(faces)
        if self.mode == "reference":
            self._embed_where_needed(faces, embed)

        locked = self._locked_face(faces)
        if locked is None:
            locked = self._choose(faces)
            self._locked = None if locked is None else locked.track_id
        return [] if locked is None else [locked]

    # ----------------------------------------------------------------------------- internals

    def _locked_face(self, faces: list[TrackedFace]) -> TrackedFace | None:
        """The locked target if it is still worth keeping."""
        if self._locked is None:
            return None
        face = next((f for f in faces if f.track_id == self._locked), None)
        if face is None or face.lost_frames > self.max_missed:
            return None  # gone, or lost for too long: the next choice may pick someone else
        if self.mode == "reference" and self._known[face.track_id].distance > self.threshold:
            return None  # re-embedded after a re-detection and found to be someone else
        return face

    def _choose(self, faces: list[TrackedFace]) -> TrackedFace | None:
        # Only faces the detector currently confirms: a coasting, unconfirmed track is no target.
        seen = [f for f in faces if f.lost_frames == 0]
        if self.mode == "largest":
            return max(seen, key=lambda f: f.area, default=None)
        matching = [f for f in seen if self._known[f.track_id].distance <= self.threshold]
        return min(matching, key=lambda f: self._known[f.track_id].distance, default=None)

    def _embed_where_needed(self, faces: list[TrackedFace], embed: EmbedFn) -> None:
        assert self._reference is not None
        for face in faces:
            known = self._known.get(face.track_id)
            new = known is None
            if known is None:
                known = self._known[face.track_id] = _Known()
            # Re-embed a track the detector has found again after losing it: across the gap the
            # association may have put a different person on this id.
            redetected = not new and known.lost_frames > 0 and face.lost_frames == 0 and face.detected
            # New tracks come from a detection, so their landmarks are the detector's; a track seen
            # first while coasting waits for its next detection.
            if (new or redetected or known.embedding is None) and face.detected:
                self.embed_calls += 1
                known.embedding = _unit(embed(face))
                if known.embedding.shape != self._reference.shape:
                    raise ValueError(
                        f"embedding length {known.embedding.shape[0]} differs from the reference's "
                        f"{self._reference.shape[0]}: the reference must come from the same model"
                    )
                known.distance = 1.0 - float(known.embedding @ self._reference)
            known.lost_frames = face.lost_frames
            if known.embedding is not None:
                face.embedding = known.embedding


def cosine_distance(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """1 - cosine similarity of two embeddings (0 = same direction, 2 = opposite)."""
    return 1.0 - float(_unit(a) @ _unit(b))


def _unit(v: npt.ArrayLike) -> Embedding:
    arr = np.asarray(v, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(arr))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("an identity embedding must be a finite, non-zero vector")
    return arr / np.float32(norm)
