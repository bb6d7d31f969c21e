"""Which tracked faces get swapped, with the chosen target locked to its track id.

Peers choose the target afresh on every frame (Deep-Live-Cam's left-most face, FaceFusion's
"one" face), so the swap jumps to a background face as soon as someone else walks in, crosses
or leans closer (Deep-Live-Cam #1152). Here the choice is made once and then follows the track id
that realtime/face/tracker.py keeps stable through motion and short occlusions:

* "largest": the largest face at the moment of choosing; re-chosen only when the locked track is
  gone (the tracker dropped it) or has been lost for more than `max_missed` frames -- and then
  only after `regain_frames` (about a second) in which a new track near where it was takes the
  lock back: someone passing in front must not get the swap for good.
* "reference": the face whose identity embedding is within `threshold` cosine distance of the
  reference photo's. Embeddings are computed when a track is new or found again after being lost
  (the id may have passed to someone else), and cached per track id: never on every frame (ArcFace
  costs 6.3 GMACs a face). One second look per frame at most (see _second_look): at the held lock
  after a look against it, at a face found where its flow failed (a switch to someone framed
  alike keeps the track id), and now and then at a face judged someone else (a first look half
  out of frame must not rule the person out for good; the wait doubles each time, up to 2 s).
  A held lock is let go after two looks in a row say someone else, at least RECHECK_FRAMES apart
  (one poor look through the fingers of a passing hand does not drop it). While the person is not
  in view, a face judged someone else from a poor view (half behind someone, half out of the
  picture, turned away: realtime/face/views.py) is looked at again as soon as it is in clearly
  better view, on any well-tracked frame: waiting out retry_frames left the person unswapped for
  ~20 frames after stepping out from behind someone.
* "all": every face.
* identity map (IdentityMapSelector, swap.target "mapped"): several references at once, each
  locked to its own track like "reference"; face A becomes X, face B becomes Y, others untouched.

Faces that are not selected are left alone (passed through unswapped) by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from realtime.face.tracker import TrackedFace
from realtime.face.views import FULL_VIEW, View, view_of

Embedding = npt.NDArray[np.float32]
EmbedFn = Callable[[TrackedFace], npt.ArrayLike]
TargetMode = Literal["largest", "all", "reference"]


RECHECK_FRAMES = 10  # frames between two looks at one face (a hand passing over it is shorter)
MAX_RETRY_FRAMES = 60  # the longest wait between looks at a face judged someone else (2 s at 30 fps)
VIEW_GAIN = 0.1  # a view this much clearer than at the last look is worth another look at once
MIN_LOOK_QUALITY = 0.8  # a tracked (not detected) frame's landmarks are good enough for that look
# A look short of the threshold by less than this share of it, and closer than the look before by
# NEAR_STEP of it, earns another look on the next frame: a face coming out from behind a hand
# (which no view measure sees) reads closer with every look.
NEAR_SHARE = 0.6
NEAR_STEP = 0.1
EMERGING = 0.01  # a near miss this much further into view than at its last look is looked at again


@dataclass(slots=True)
class _Known:
    """What the selector remembers about one track id."""

    embedding: Embedding | None = None  # unit length
    distance: float = float("inf")  # cosine distance to the reference
    lost_frames: int = 0  # as last reported, to notice a re-detection
    since_embed: int = 0  # frames since the last embedding
    misses: int = 0  # embeddings in a row over the threshold
    recheck: bool = False  # found where its flow failed: due a look (which may have to wait)
    view: View = field(default_factory=View)  # how clearly the face was seen at the last look
    closing: bool = False  # the last look was a near miss, closer than the one before


@dataclass(slots=True)
class _Regain:
    """A lost lock waiting for its face to be found again ("largest" mode)."""

    box: npt.NDArray[np.float32]  # where the face was last seen
    frames_left: int
    bystanders: set[int]  # tracks in view when it was lost: not the same person

    def near(self, face: TrackedFace) -> bool:
        return _near(self.box, face)


def _centre_gap(box: npt.NDArray[np.float32], face: TrackedFace) -> float:
    x1, y1, x2, y2 = (float(v) for v in box)
    fx1, fy1, fx2, fy2 = (float(v) for v in face.box)
    return float(np.hypot((fx1 + fx2 - x1 - x2) / 2.0, (fy1 + fy2 - y1 - y2) / 2.0))


def _near(box: npt.NDArray[np.float32], face: TrackedFace) -> bool:
    """Within three face sizes of `box`, where a lost face was (a fast mover between two analysed
    frames, or one that moved while hidden)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    size = max(x2 - x1, y2 - y1, 1.0)
    fx1, fy1, fx2, fy2 = (float(v) for v in face.box)
    dx = (fx1 + fx2 - x1 - x2) / 2.0
    dy = (fy1 + fy2 - y1 - y2) / 2.0
    return dx * dx + dy * dy <= (3.0 * size) ** 2


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
        regain_frames: int = 30,
        retry_frames: int = 15,
        view_gain: float = VIEW_GAIN,
        seek_frames: int = 0,
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
        self.regain_frames = int(regain_frames)
        self.retry_frames = int(retry_frames)  # "reference": frames between looks at a face judged too far
        self.view_gain = float(view_gain)  # inf: no look again on a clearer view (the bench compares)
        # "reference": frames after the locked person was last seen during which they are sought
        # (see `seeking`); 0: never.
        self.seek_frames = int(seek_frames)
        self._unseen = -1  # frames since the locked person was last seen (-1: never locked)
        self._locked_box: npt.NDArray[np.float32] | None = None  # where the locked face was last seen
        self._regain: _Regain | None = None
        self._seen_with_lock: set[int] = set()  # other tracks in view when the target was last seen
        self._prefer: npt.NDArray[np.float32] | None = None  # after a cut: where the target was

    @property
    def seeking(self) -> bool:
        """The locked person went out of view (behind someone, out of the picture) within
        `seek_frames` and is not back yet: worth a detection on every frame, and faces not yet
        confirmed are not to be shown as they are."""
        return self.mode == "reference" and 0 < self._unseen <= self.seek_frames

    @property
    def locked_id(self) -> int | None:
        """The track id the swap is locked to ("largest" / "reference"), or None."""
        return self._locked

    def unlock(self) -> None:
        """Forget the chosen target (the user asked to pick again)."""
        self._locked = None
        self._locked_box = None
        self._regain = None

    def new_shot(self) -> None:
        """A scene cut: every track is new. "largest" chooses again, preferring the face nearest
        to where the target was (a hand over the lens reads as a cut; choosing the largest then
        gave the swap to a bystander for good); the others choose again by identity."""
        prefer = self._locked_box if self.mode == "largest" else None
        self.unlock()
        self._prefer = prefer

    def select(
        self, faces: list[TrackedFace], embed: EmbedFn, frame_size: tuple[int, int] | None = None
    ) -> list[TrackedFace]:
        """The faces to swap this frame, a subset of `faces` in their order.

        `embed(face)` returns the face's identity embedding (e.g. ArcFace on its aligned crop); it
        is called only in "reference" mode, once per new or re-detected track. The embedding is also
        stored on `face.embedding` for every face the selector knows it for. `frame_size` (width,
        height) lets a look at a face half out of the picture be taken again once it is in.
        """
        self.observe(faces, embed, frame_size)
        if self.mode == "all":
            return list(faces)
        locked = self.locked_face(faces)
        if locked is not None and locked.lost_frames > 0 and self.mode == "reference":
            # Lost but not given up yet: a face confirmed as the person elsewhere, and not in view
            # beside them all along (a poster, a reflection of them), is them found again under a
            # new id (waiting out the lost track left them unswapped). "largest" has no such proof:
            # someone walking past would take the lock (see _regained).
            beside = self._seen_with_lock | {locked.track_id}
            locked = self._choose([f for f in faces if f.track_id not in beside]) or locked
        if locked is None and self.mode == "largest":
            locked = self._regained(faces)
        if locked is None and self._regain is None:
            locked = self._choose(faces)
        self._locked = None if locked is None else locked.track_id
        self._locked_box = None if locked is None else np.array(locked.box, dtype=np.float32)
        self.note_seen(locked is not None and locked.lost_frames == 0)
        if locked is not None and locked.lost_frames == 0:
            # Who else was in view while the target was surely itself: only they are bystanders
            # (a track born while it coasted may be the same person found again under a new id).
            self._seen_with_lock = {f.track_id for f in faces if f.track_id != locked.track_id}
        return [] if locked is None else [locked]

    def _regained(self, faces: list[TrackedFace]) -> TrackedFace | None:
        """ "largest" mode, the locked face gone (hidden by someone passing in front, the tracker
        gave its track up): for `regain_frames` the lock waits for a NEW track near where the face
        was, the same person found again, rather than going to a face that was in view all along
        and not chosen (that took the swap for good after a 0.2 s occlusion)."""
        if self._regain is None:
            if self._locked is None or self._locked_box is None or self.regain_frames <= 0:
                return None
            self._regain = _Regain(self._locked_box, self.regain_frames, set(self._seen_with_lock))
        regain = self._regain
        # A face found under a new id near where the target was is the target found again (the
        # tracker gives a fast mover a new track): the largest such face takes the lock back.
        # Bystanders never do, nor a face that turns up elsewhere (a stranger walking in).
        found = [f for f in self.candidates(faces) if f.track_id not in regain.bystanders and regain.near(f)]
        if found:
            self._regain = None
            return max(found, key=lambda f: f.area)
        regain.frames_left -= 1
        if regain.frames_left <= 0:
            self._regain = None  # not back: the next choice is made afresh
        return None

    # ------------------------------------------------- steps, public for IdentityMapSelector

    def observe(
        self, faces: list[TrackedFace], embed: EmbedFn, frame_size: tuple[int, int] | None = None
    ) -> None:
        """Forget tracks that are gone; in "reference" mode embed new or re-detected tracks."""
        present = {face.track_id for face in faces}
        for gone in [tid for tid in self._known if tid not in present]:
            del self._known[gone]  # ids are never reused: nothing to remember them for
        if self.mode == "reference":
            self._embed_where_needed(faces, embed, frame_size)

    def locked_face(self, faces: list[TrackedFace]) -> TrackedFace | None:
        """The locked target if it is still worth keeping (call after `observe`)."""
        if self._locked is None:
            return None
        face = next((f for f in faces if f.track_id == self._locked), None)
        if face is None or face.lost_frames > self.max_missed:
            return None  # gone, or lost for too long: the next choice may pick someone else
        if self.mode == "reference" and self._known[face.track_id].misses >= 2:
            return None  # looked at twice in a row since it was chosen, and found to be someone else
        return face

    def candidates(self, faces: list[TrackedFace]) -> list[TrackedFace]:
        """Faces that may be chosen now: confirmed by the detector, swappable (a face the tracker
        passes through, e.g. below the detector threshold, would hold the lock with nothing
        swapped), and in "reference" mode within the threshold of the reference (call after
        `observe`)."""
        seen = [f for f in faces if f.lost_frames == 0 and f.swap_weight > 0.0]
        if self.mode != "reference":
            return seen
        return [f for f in seen if self._known[f.track_id].distance <= self.threshold]

    def distance(self, track_id: int) -> float:
        """Cosine distance of a track's embedding to the reference (inf when not embedded yet)."""
        known = self._known.get(track_id)
        return float("inf") if known is None else known.distance

    @property
    def unseen_frames(self) -> int:
        """Frames since the locked person was last seen (-1: never locked)."""
        return self._unseen

    def unsure(self, face: TrackedFace) -> bool:
        """While the person is sought: a face in view that may be them and is not confirmed yet (not
        looked at yet, a near miss, or judged someone else from a part view). Call after `select`."""
        if not self.seeking or face.lost_frames > 0 or face.track_id == self._locked:
            return False
        known = self._known.get(face.track_id)
        if known is None or known.embedding is None:
            return True
        if known.distance <= self.threshold:
            return False  # it is them (chosen, or another identity's claim)
        near = known.distance <= self.threshold * (1.0 + NEAR_SHARE)
        return near or known.view.visible < FULL_VIEW

    def note_seen(self, seen: bool) -> None:
        """Whether the locked person was seen this frame (for `seeking`)."""
        if seen:
            self._unseen = 0
        elif self._unseen >= 0:
            self._unseen += 1

    def lock(self, track_id: int) -> None:
        """Lock onto a track chosen from `candidates` (by a caller arbitrating several selectors)."""
        self._locked = track_id
        self._regain = None

    # ----------------------------------------------------------------------------- internals

    def _choose(self, faces: list[TrackedFace]) -> TrackedFace | None:
        candidates = self.candidates(faces)
        if self.mode == "largest":
            prefer = self._prefer
            if candidates:
                self._prefer = None  # used once: kept only while no face is in view to choose
            if prefer is not None:
                near = [f for f in candidates if _near(prefer, f)]
                if near:
                    return min(near, key=lambda f: _centre_gap(prefer, f))
            return max(candidates, key=lambda f: f.area, default=None)
        return min(candidates, key=lambda f: self._known[f.track_id].distance, default=None)

    def _embed_where_needed(
        self, faces: list[TrackedFace], embed: EmbedFn, frame_size: tuple[int, int] | None
    ) -> None:
        second: tuple[tuple[int, int], TrackedFace] | None = None  # (priority, -wait), face
        seen = [f for f in faces if f.lost_frames == 0]
        # The person is sought while not locked, or while their locked track is lost (they may be
        # back under a new id).
        sought = self._locked is None or not any(f.track_id == self._locked for f in seen)
        views = {
            f.track_id: view_of(f.box, f.kps, [o.box for o in seen if o is not f], frame_size) for f in seen
        }
        for face in faces:
            known = self._known.get(face.track_id)
            new = known is None
            if known is None:
                known = self._known[face.track_id] = _Known()
            known.since_embed += 1
            # Re-embed a track the detector has found again after losing it: across the gap the
            # association may have put a different person on this id.
            redetected = not new and face.detected and known.lost_frames > 0 and face.lost_frames == 0
            # New tracks come from a detection, so their landmarks are the detector's; a track seen
            # first while coasting waits for its next detection.
            view = views.get(face.track_id, View())
            if (new or redetected or known.embedding is None) and face.detected:
                self._embed_into(known, face, embed, view)
            elif sought and (self._clearer(face, known, view) or self._closing(face, known, view)):
                # Judged someone else from a poorer view: looked at again now, ahead of the rest.
                if second is None or (-1, -known.since_embed) < second[0]:
                    second = ((-1, -known.since_embed), face)
            elif face.detected:
                known.recheck = known.recheck or face.reacquired  # kept until the look is taken
                priority = self._second_look(face, known)
                if priority is not None and (second is None or (priority, -known.since_embed) < second[0]):
                    second = ((priority, -known.since_embed), face)
            known.lost_frames = face.lost_frames
        if second is not None:  # one second look per frame: the recogniser is the dearest model here
            face = second[1]
            self._embed_into(self._known[face.track_id], face, embed, views.get(face.track_id, View()))
        for face in faces:
            embedding = self._known[face.track_id].embedding
            if embedding is not None:
                face.embedding = embedding

    def _second_look(self, face: TrackedFace, known: _Known) -> int | None:
        """Whether a face already looked at is due another look, and how urgently (0 first), or None.

        0: the held lock after one look against it. 1: a face the detector found where its flow
        failed (a switch to someone framed alike keeps the id, and the stranger kept the swap).
        Both wait RECHECK_FRAMES since the last look, so a hand passing over the face cannot give
        two poor looks in a row. 2: while the person is not found, a face judged someone else (a
        first look half out of frame), after retry_frames, doubling with each look that says so
        again up to MAX_RETRY_FRAMES (bystanders would cost ArcFace runs for ever)."""
        if known.since_embed < RECHECK_FRAMES:
            return None
        if face.track_id == self._locked and known.misses >= 1:
            return 0
        if known.recheck:
            return 1
        if known.distance > self.threshold and self._locked is None:
            # Only while the person is not found: with them locked, others need no second look.
            wait = min(self.retry_frames * 2 ** max(known.misses - 1, 0), MAX_RETRY_FRAMES)
            return 2 if known.since_embed >= wait else None
        return None

    def _clearer(self, face: TrackedFace, known: _Known, view: View) -> bool:
        """A face judged someone else at its last look, now in clearly better view, on a frame whose
        landmarks are the detector's or well tracked."""
        if known.embedding is None or known.distance <= self.threshold or face.lost_frames > 0:
            return False
        if not np.isfinite(self.view_gain):
            return False  # turned off
        if not face.detected and face.quality < MIN_LOOK_QUALITY:
            return False
        return view.clearer_than(known.view, self.view_gain)

    def _closing(self, face: TrackedFace, known: _Known, view: View) -> bool:
        """A near miss closing in on the threshold, or coming further into view, on a frame good
        enough to look at. While the person is sought, a near miss not in full view is looked at on
        every such frame: the view measure is noisy as someone steps out from behind another (it
        read 0.80 after 0.84 on the look-alikes scene), and waiting for it to grow cost a frame."""
        if face.lost_frames > 0 or not np.isfinite(self.view_gain) or known.distance <= self.threshold:
            return False
        near = known.distance <= self.threshold * (1.0 + NEAR_SHARE)
        growing = view.visible > known.view.visible + EMERGING or self.seeking
        emerging = near and known.view.visible < FULL_VIEW and growing
        if not (known.closing or emerging):
            return False
        return face.detected or face.quality >= MIN_LOOK_QUALITY

    def _embed_into(self, known: _Known, face: TrackedFace, embed: EmbedFn, view: View | None = None) -> None:
        assert self._reference is not None
        self.embed_calls += 1
        embedding = _unit(embed(face))
        if embedding.shape != self._reference.shape:
            raise ValueError(
                f"embedding length {embedding.shape[0]} differs from the reference's "
                f"{self._reference.shape[0]}: the reference must come from the same model"
            )
        known.embedding = embedding
        before = known.distance
        known.distance = 1.0 - float(embedding @ self._reference)
        near = self.threshold < known.distance <= self.threshold * (1.0 + NEAR_SHARE)
        known.closing = near and known.distance <= before - NEAR_STEP * self.threshold
        known.since_embed = 0
        known.view = View() if view is None else view
        known.recheck = False
        known.misses = known.misses + 1 if known.distance > self.threshold else 0


class IdentityMapSelector:
    """Several people at once: the face of reference i becomes identity i ("face A becomes X,
    face B becomes Y"); faces that match no reference are left alone.

    One "reference" TargetSelector per identity, so each mapped person is locked to their track
    exactly as the single-reference mode locks one (kept through crossings and short losses,
    dropped when a re-detection shows someone else). On top of that, one track serves at most one
    identity: held locks win, then free identities take the globally closest unclaimed
    (identity, face) pairs first, so two look-alikes cannot both grab the nearer face.

    Each face is embedded at most once per frame however many identities look at it.
    """

    def __init__(
        self,
        references: Sequence[npt.ArrayLike],
        threshold: float = 0.6,
        *,
        max_missed: int = 5,
        view_gain: float = VIEW_GAIN,
        seek_frames: int = 0,
    ) -> None:
        if not references:
            raise ValueError("identity mapping needs at least one reference embedding (--map REF=SOURCE)")
        self._selectors = tuple(
            TargetSelector(
                "reference", r, threshold, max_missed=max_missed, view_gain=view_gain, seek_frames=seek_frames
            )
            for r in references
        )
        self.embed_calls = 0

    def unlock(self) -> None:
        """Forget every identity's lock."""
        for selector in self._selectors:
            selector.unlock()

    def new_shot(self) -> None:
        """A scene cut: every identity is found again by its embedding."""
        self.unlock()

    @property
    def seeking(self) -> bool:
        """Some mapped person went out of view a moment ago and is not back yet."""
        return any(s.seeking for s in self._selectors)

    def unsure(self, face: TrackedFace) -> int | None:
        """The identity (index) of a sought person `face` may be, not confirmed yet (see
        TargetSelector.unsure), or None."""
        return next((i for i, s in enumerate(self._selectors) if s.unsure(face)), None)

    def unseen_frames(self, identity: int) -> int:
        return self._selectors[identity].unseen_frames

    @property
    def locked_ids(self) -> tuple[int | None, ...]:
        """Per identity, the track id it is locked to (None = not in view / not found yet)."""
        return tuple(s.locked_id for s in self._selectors)

    @property
    def threshold(self) -> float:
        return self._selectors[0].threshold

    @threshold.setter
    def threshold(self, distance: float) -> None:
        """A live change: every identity keeps its lock while its face stays within the new
        threshold (a lowered one lets go of a face now too far once two looks agree)."""
        for selector in self._selectors:
            selector.threshold = float(distance)

    @property
    def seek_frames(self) -> int:
        return self._selectors[0].seek_frames

    @seek_frames.setter
    def seek_frames(self, frames: int) -> None:
        for selector in self._selectors:
            selector.seek_frames = int(frames)

    @property
    def max_missed(self) -> int:
        return self._selectors[0].max_missed

    @max_missed.setter
    def max_missed(self, frames: int) -> None:
        """A live change: every identity keeps its lock."""
        for selector in self._selectors:
            selector.max_missed = int(frames)

    def select(
        self, faces: list[TrackedFace], embed: EmbedFn, frame_size: tuple[int, int] | None = None
    ) -> list[tuple[TrackedFace, int]]:
        """(face, identity index) for each face to swap, in the order of `faces`."""
        memo: dict[int, Embedding] = {}

        def embed_once(face: TrackedFace) -> Embedding:
            got = memo.get(face.track_id)
            if got is None:
                self.embed_calls += 1
                got = memo[face.track_id] = _unit(embed(face))
            return got

        for sel in self._selectors:
            sel.observe(faces, embed_once, frame_size)
        claimed: dict[int, int] = {}  # track id -> identity index
        # Held locks first: they are what keeps A on X when B walks in or crosses. (Locks are
        # handed out below to unclaimed tracks only, so two never share a track.)
        for i, sel in enumerate(self._selectors):
            face = sel.locked_face(faces)
            if face is None or face.track_id in claimed:
                sel.unlock()
                continue
            claimed[face.track_id] = i
        # Then free identities, closest pair first.
        free = [i for i, sel in enumerate(self._selectors) if sel.locked_id is None]
        pairs = sorted(
            (
                (self._selectors[i].distance(f.track_id), i, f.track_id)
                for i in free
                for f in self._selectors[i].candidates(faces)
                if f.track_id not in claimed
            ),
        )
        for _dist, i, track_id in pairs:
            if track_id in claimed or self._selectors[i].locked_id is not None:
                continue
            self._selectors[i].lock(track_id)
            claimed[track_id] = i
        seen = {f.track_id for f in faces if f.lost_frames == 0}
        for sel in self._selectors:
            sel.note_seen(sel.locked_id in seen)
        return [(f, claimed[f.track_id]) for f in faces if f.track_id in claimed]


def cosine_distance(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """1 - cosine similarity of two embeddings (0 = same direction, 2 = opposite)."""
    return 1.0 - float(_unit(a) @ _unit(b))


def _unit(v: npt.ArrayLike) -> Embedding:
    arr = np.asarray(v, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(arr))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("an identity embedding must be a finite, non-zero vector")
    return arr / np.float32(norm)
