"""The analysis stage of a frame: detect, track, smooth and choose the target faces.

Analysis needs frames in order and carries state from one frame to the next, so one analyser sees
every frame (the swap workers, realtime.face.swap_worker, run several frames at once).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from models.ops.align import plausible_landmarks
from models.types import Detection, ImageBGR
from models.wrappers.scrfd import SCRFD
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings, SettingsError
from realtime.face.model_api import AnalysisModels, FaceDetector
from realtime.face.picks import LivePicks, MappedPerson, PickedIdentity
from realtime.face.privacy import Cover, PrivacyPlan
from realtime.face.targets import (
    VIEW_GAIN,
    IdentityMapSelector,
    TargetMode,
    TargetSelector,
    cosine_distance,
)
from realtime.face.tracker import FaceTracker, TrackedFace


class FaceAnalyser:
    """Detect every K frames, track and smooth in between, choose the target faces."""

    def __init__(
        self,
        models: AnalysisModels,
        settings: Settings,
        reference_embedding: npt.NDArray[np.float32] | None = None,
        mapped_references: Sequence[npt.NDArray[np.float32]] = (),
        *,
        eager: bool = True,
        picks: LivePicks | None = None,
    ) -> None:
        """mapped_references: for swap.target "mapped", the embedding of each `--map` reference
        photo; the face matching reference k (0-based) is swapped with identity k + 1.
        eager: while a locked or mapped person is missing, detect on every frame, look again at a face
        in clearer view or closing in, and swap them at once when found (False: as before, on the
        detection schedule and the retry wait; the leak bench compares the two)."""
        self._picks = picks  # faces picked in the live preview (realtime/face/picks.py)
        # The recogniser the models were loaded with: a live change of swap.recognizer applies at the
        # next load, so until then its threshold is the one that fits the embeddings here.
        self._recognizer = settings.swap.recognizer
        self._picked: npt.NDArray[np.float32] | None = None  # the picked person's embedding
        # Where the last pick was clicked (frame pixels, the face's nose), until the frame after it
        # locks onto the face there: the person under the pointer, whoever looks alike.
        self._pick_at: npt.NDArray[np.float32] | None = None
        # The live map (people clicked and mapped to an identity): its version as last read, a
        # selector over its people and, per person of that selector, their identity.
        self._map_version = -1
        self._map_selector: IdentityMapSelector | None = None
        self._map_identities: tuple[int, ...] = ()
        self._view_gain = VIEW_GAIN if eager else float("inf")
        self._eager = eager
        self._models = models
        self._reference = reference_embedding
        self._mapped = tuple(mapped_references)
        self._settings = settings
        self._detector: FaceDetector = models.detector
        if isinstance(self._detector, SCRFD):  # shared models may carry another run's live threshold
            self._detector.score_threshold = settings.detector.threshold
        self._tracker = self._new_tracker(settings)
        self._selector = self._new_selector(settings)
        # Per track: the frame number and embedding of its last look (the selector asks only when a
        # look is due, so a track is embedded at most once per frame).
        self._embeddings: dict[int, tuple[int, npt.NDArray[np.float32]]] = {}
        self._frame_no = 0
        self._prompt: dict[int, int] = {}  # track id -> frames it is still swapped without a fade
        # Selection weight and identity of each track chosen now or fading out after it was chosen:
        # a change of target fades over tracker.fade_frames instead of popping.
        self._selection: dict[int, _Chosen] = {}
        self._timings: dict[str, float] = {}
        self._current_image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)

    def _new_tracker(self, settings: Settings) -> FaceTracker:
        return FaceTracker.from_settings(self._timed_detect, settings)

    def _new_selector(self, settings: Settings) -> TargetSelector | IdentityMapSelector:
        if self._picked is not None and settings.swap.target != "mapped":
            return self._reference_selector(settings, self._picked)
        if settings.swap.target == "mapped":
            if not self._mapped:
                raise SettingsError(
                    "Setting 'swap.target' is 'mapped' but no identity mapping was given.",
                    hint="Pass --map REF_PHOTO=SOURCE_PHOTO (repeatable).",
                )
            return IdentityMapSelector(
                self._mapped,
                self._threshold(settings),
                max_missed=settings.tracker.max_missed,
                view_gain=self._view_gain,
                seek_frames=settings.privacy.expect_frames,
            )
        if settings.swap.target == "reference" and self._reference is None:
            raise SettingsError(
                "Setting 'swap.target' is 'reference' but no reference photo was given.",
                hint="Pass --reference PHOTO (a photo of the person whose face is swapped).",
            )
        return self._reference_selector(settings, self._reference, settings.swap.target)

    def _threshold(self, settings: Settings) -> float:
        swap = settings.swap
        return swap.dlib_threshold if self._recognizer == "dlib" else swap.reference_threshold

    def _reference_selector(
        self, settings: Settings, reference: npt.NDArray[np.float32] | None, mode: TargetMode = "reference"
    ) -> TargetSelector:
        return TargetSelector(
            mode,
            reference_embedding=reference,
            threshold=self._threshold(settings),
            max_missed=settings.tracker.max_missed,
            view_gain=self._view_gain,
            seek_frames=settings.privacy.expect_frames,
        )

    def _timed_detect(self, image: ImageBGR) -> list[Detection]:
        t0 = time.perf_counter()
        faces = self._detector.detect(image, max_faces=self._settings.detector.max_faces)
        self._timings["detect"] = _ms(t0)
        return faces

    def _embed(self, face: TrackedFace) -> npt.NDArray[np.float32]:
        cached = self._embeddings.get(face.track_id)
        if cached is None or cached[0] != self._frame_no:
            cached = (self._frame_no, self._models.identity.embed(self._current_image, face.raw_kps))
            self._embeddings[face.track_id] = cached
        return cached[1]

    def reconfigure(self, settings: Settings) -> None:
        """Apply a live settings change that needs no model reload."""
        old = self._settings
        self._settings = settings
        if old.tracker != settings.tracker or old.detector.interval != settings.detector.interval:
            # Keeps the tracks (ids, smoothing state): a slider move must not re-lock the target.
            self._tracker.reconfigure(settings.tracker, settings.detector.interval)
        if old.detector.threshold != settings.detector.threshold:
            # Live, like the sliders: a reload would reset every track (the swap blinks, and in
            # "largest" mode the target may jump to another face).
            self._tracker.score_threshold = settings.detector.threshold
            if isinstance(self._detector, SCRFD):
                self._detector.score_threshold = settings.detector.threshold
        if old.swap.target != settings.swap.target:
            self._selector = self._new_selector(settings)  # a new way of choosing: choose again
            return
        # Everything else in place, keeping the lock: rebuilding the selector for a threshold
        # slider or a swap-model change would move the swap to whoever is largest at that moment.
        for selector in (self._selector, self._map_selector):
            if selector is None:
                continue
            if self._threshold(old) != self._threshold(settings):
                selector.threshold = self._threshold(settings)
            if old.privacy.expect_frames != settings.privacy.expect_frames:
                selector.seek_frames = settings.privacy.expect_frames
            if old.tracker.max_missed != settings.tracker.max_missed:
                # A selector giving a face up after fewer lost frames than the tracker keeps it
                # could jump to another person in "largest" mode.
                selector.max_missed = settings.tracker.max_missed

    def prepare(self, image: ImageBGR) -> object | None:
        """What `analyse` can take ready-made for this picture (the flow's small grey copy), made on
        another thread while the analysis works on the frame before. Safe to call from any thread."""
        return self._tracker.prepare(image)

    def analyse(
        self, image: ImageBGR, timestamp: float, settings: Settings, *, prepared: object | None = None
    ) -> FramePlan:
        """The plan for this frame. `prepared`: this analyser's `prepare(image)`, made ahead."""
        if settings is not self._settings:
            self.reconfigure(settings)
        self._timings = {}
        self._current_image = image
        self._frame_no += 1
        self._take_pick(settings)
        self._take_map(settings)
        t0 = time.perf_counter()
        flow_grey = prepared if isinstance(prepared, np.ndarray) else None
        faces = self._tracker.update(image, timestamp, flow_grey=flow_grey)
        track_ms = _ms(t0) - self._timings.get("detect", 0.0)
        t1 = time.perf_counter()
        cut = self._tracker.cut
        if cut:
            # A new shot: the locked target is gone with the old tracks; waiting for it to be
            # found again near where it was (regain) would leave the new shot unswapped for a second.
            self._selector.new_shot()
            if self._map_selector is not None:
                self._map_selector.new_shot()
            self._selection = {}
        size = (image.shape[1], image.shape[0])
        self._lock_under_pick(faces)
        was_seeking = self._seeking()
        # Mapped people first, each with their own identity; the settings' choice among the rest.
        chosen: list[tuple[TrackedFace, int]] = []
        if self._map_selector is not None:
            ids = self._map_identities
            chosen = [(face, ids[k]) for face, k in self._map_selector.select(faces, self._embed, size)]
        mapped = {face.track_id for face, _ in chosen}
        rest = [face for face in faces if face.track_id not in mapped]
        if isinstance(self._selector, IdentityMapSelector):
            chosen += [(face, k + 1) for face, k in self._selector.select(rest, self._embed, size)]
        else:
            chosen += [(face, 0) for face in self._selector.select(rest, self._embed, size)]
        if self._seeking():
            self._tracker.seek()
        live_ids = {f.track_id for f in faces}
        for stale in [k for k in self._embeddings if k not in live_ids]:
            del self._embeddings[stale]
        fade = settings.tracker.fade_frames
        # A sought person found again is swapped at once, not faded in: a fade would show their own
        # face for fade_frames more frames.
        self._prompt = {k: n - 1 for k, n in self._prompt.items() if n > 1 and k in live_ids}
        # So is a person confirmed by identity on a track still fading in as new (entering the
        # picture): the fade is for a choice that may change, and this one is proof.
        selector = self._selector
        by_identity = self._eager and (
            isinstance(selector, IdentityMapSelector) or selector.mode == "reference"
        )
        for face, _ in chosen:
            if face.track_id in self._selection:
                continue
            if was_seeking or (by_identity and face.swap_weight < 1.0 and face.lost_frames == 0):
                self._prompt[face.track_id] = max(fade, 1)
        plan = PrivacyPlan(timings=dict(self._timings))
        plan.timings["track"] = track_ms
        plan.timings["select"] = _ms(t1)
        plan.faces = len(faces)
        planned: set[int] = set()
        fading = self._fade_selection(chosen, faces, fade, fresh=cut, prompt=set(self._prompt), mapped=mapped)
        for face, selected in fading:
            planned.add(face.track_id)
            weight = face.swap_weight * selected.weight
            if face.track_id in self._prompt and face.lost_frames == 0 and face.swap_weight > 0.0:
                weight = selected.weight  # (the tracker's own fade-in of a new track included)
            # Landmarks no similarity can align pass through (the worker would skip them): counted
            # as passed through, not as swapped.
            if weight > 0.0 and plausible_landmarks(face.kps):
                plan.targets.append(
                    SwapTarget(
                        face.kps,
                        weight,
                        face.track_id,
                        selected.identity,
                        previous_identity=selected.previous,
                        mix=selected.mix,
                        mapped=selected.mapped,
                    )
                )
            elif weight > 0.0 or face.lost_frames == 0:
                # (A face faded out because the detector lost it is not left alone on purpose.)
                plan.passthrough += 1
        if settings.privacy.fallback != "original":
            self._fall_back(plan, faces, {f.track_id for f, _ in chosen}, settings)
        # Faces the tracker itself passes through (below the detector threshold, tracking not
        # trusted) count as passed through whether or not they are chosen: "largest" does not
        # choose them, and the count is how a user learns why a face was left alone.
        # (A face the detector lost, fading as it leaves the picture, is not one of them.)
        plan.passthrough += sum(
            1 for f in faces if f.track_id not in planned and f.swap_weight == 0.0 and f.lost_frames == 0
        )
        return plan

    def _take_pick(self, settings: Settings) -> None:
        """A face picked in the preview since the last frame: lock onto that person from now on (its
        embedding, by this run's recogniser); an unpick: back to the settings' own choice."""
        pick = None if self._picks is None else self._picks.take()
        if pick is None:
            return
        if pick == "unpick":
            self._picked = None
        elif isinstance(pick, PickedIdentity):
            if pick.recognizer != self._recognizer:
                return  # embedded by another recogniser: its distances mean nothing here
            self._picked = _unit(pick.embedding)
        else:
            self._picked = _unit(self._models.identity.embed(pick.image, pick.kps))
            assert self._picks is not None
            self._picks.remember(self._recognizer, self._picked)
            self._pick_at = np.asarray(pick.kps, np.float32)[2].copy()
        self._selector = self._new_selector(settings)
        self._selection = {}

    def _lock_under_pick(self, faces: Sequence[TrackedFace]) -> None:
        """The frame after a pick: lock onto the face under the pointer (its box holds the clicked
        nose), not the best look-alike elsewhere. None there: the run's detector misses that face
        (the user is told); the pick's embedding then chooses, as a reference photo would."""
        at, self._pick_at = self._pick_at, None
        if at is None or not isinstance(self._selector, TargetSelector):
            return
        under = [f for f in faces if f.lost_frames == 0 and _holds(f.box, at)]
        if under:
            self._selector.lock(min(under, key=lambda f: _centre_distance(f.box, at)).track_id)
        elif self._picks is not None:
            self._picks.tell(
                f"The run's face detector ({self._models.detector_name}) finds no face where you "
                "clicked; another detector (Stages > Detector, e.g. mtcnn) may."
            )

    def _seeking(self) -> bool:
        """Some locked or mapped person went out of view a moment ago (eager analysers only)."""
        map_seeking = self._map_selector is not None and self._map_selector.seeking
        return self._eager and (self._selector.seeking or map_seeking)

    def _take_map(self, settings: Settings) -> None:
        """Faces clicked and mapped since the last frame: embedded with this run's recogniser and
        added to the live map; a changed map: a new selector over its people (those embedded by
        this recogniser and whose identity is in this run)."""
        if self._picks is None:
            return
        threshold = self._threshold(settings)
        for pick in self._picks.take_map_picks():
            embedding = _unit(self._models.identity.embed(pick.image, pick.kps))
            vector = tuple(float(v) for v in embedding)
            person = MappedPerson(self._recognizer, vector, pick.identity, pick.key)

            def same(p: MappedPerson, e: npt.NDArray[np.float32] = embedding) -> bool:
                return p.recognizer == self._recognizer and cosine_distance(p.embedding, e) <= threshold

            self._picks.add_mapped(person, same)
        version, people = self._picks.mapping()
        if version == self._map_version:
            return
        self._map_version = version
        usable = [p for p in people if p.recognizer == self._recognizer and p.identity is not None]
        self._map_identities = tuple(p.identity for p in usable if p.identity is not None)
        self._map_selector = None
        if usable:
            self._map_selector = IdentityMapSelector(
                [p.embedding for p in usable],
                threshold,
                max_missed=settings.tracker.max_missed,
                view_gain=self._view_gain,
                seek_frames=settings.privacy.expect_frames,
            )

    def _fall_back(
        self, plan: PrivacyPlan, faces: Sequence[TrackedFace], chosen: set[int], s: Settings
    ) -> None:
        """The privacy fallback (realtime/face/privacy.py): cover a chosen face still fading in, and a
        face that may be a sought person and is not confirmed yet ("hold": swap it with the sought
        identity while they have been gone no longer than hold_frames)."""
        shown = {t.track_id: t.weight for t in plan.targets}
        for face in faces:
            if face.lost_frames > 0:
                continue
            weight = shown.get(face.track_id)
            if weight is not None:
                if face.track_id in chosen and weight < 1.0:
                    plan.covers.append(Cover(face.kps, face.track_id, "fading in", 1.0 - weight))
                continue
            sought = self._unsure_identity(face)
            if sought is None or not plausible_landmarks(face.kps):
                continue
            unseen, identity = sought
            if s.privacy.fallback == "hold" and 0 < unseen <= s.privacy.hold_frames:
                plan.targets.append(SwapTarget(face.kps, 1.0, face.track_id, identity))
                plan.covers.append(Cover(face.kps, face.track_id, "held", 0.0))
            else:
                plan.covers.append(Cover(face.kps, face.track_id, "not confirmed yet"))

    def _unsure_identity(self, face: TrackedFace) -> tuple[int, int] | None:
        """(frames the sought person has been unseen, the source identity they are swapped with)
        when `face` may be someone sought and is not confirmed yet: the settings' target or mapped
        people, or a person clicked and mapped in the preview; else None."""
        selector = self._selector
        if isinstance(selector, IdentityMapSelector):
            k = selector.unsure(face)
            if k is not None:
                return selector.unseen_frames(k), k + 1  # mapped k is swapped with identity k + 1
        elif selector.unsure(face):
            return selector.unseen_frames, 0
        live = self._map_selector
        k = None if live is None else live.unsure(face)
        if live is None or k is None:
            return None
        return live.unseen_frames(k), self._map_identities[k]

    def _fade_selection(
        self,
        chosen: Sequence[tuple[TrackedFace, int]],
        faces: Sequence[TrackedFace],
        fade_frames: int,
        *,
        fresh: bool = False,
        prompt: set[int] | None = None,
        mapped: set[int] | None = None,
    ) -> list[tuple[TrackedFace, _Chosen]]:
        """The chosen faces with their selection weight, ramping up, plus the faces chosen before
        and no longer, ramping down while still in view (the reference face turned out to be
        someone else, the locked target handed over to another). A face given another identity
        (mapped mode) cross-fades into it over the same number of frames. `fresh`: a scene cut, where a
        choice takes effect at once; `prompt`: tracks chosen at once (a sought person found again);
        `mapped`: tracks whose identity comes from the live map."""
        step = 1.0 if fade_frames <= 0 else 1.0 / fade_frames
        present = {face.track_id: face for face in faces}
        picked = {face.track_id: (face, identity) for face, identity in chosen}
        out: list[tuple[TrackedFace, _Chosen]] = []
        state: dict[int, _Chosen] = {}
        for track_id, (face, identity) in picked.items():
            by_map = mapped is not None and track_id in mapped
            before = self._selection.get(track_id)
            if before is None:
                # A face chosen since its track began needs no second fade-in: the tracker fades it in.
                at_once = fresh or (prompt is not None and track_id in prompt)
                weight = 1.0 if at_once or face.swap_weight < 1.0 else step
                now = _Chosen(weight, identity, mapped=by_map)
            else:
                now = replace(before.step_to(identity, step), mapped=by_map)
            state[track_id] = now
            out.append((face, now))
        for track_id, before in self._selection.items():
            if track_id in picked or track_id not in present:
                continue
            leaving = before.fade_out(step)
            if leaving.weight > 0.0:
                state[track_id] = leaving
                out.append((present[track_id], leaving))
        self._selection = state
        return out


@dataclass(frozen=True, slots=True)
class _Chosen:
    """A chosen face's selection weight (0..1) and identity; `previous`/`mix` while it cross-fades
    from another identity (`mix`: the new identity's share)."""

    weight: float
    identity: int
    previous: int | None = None
    mix: float = 1.0
    mapped: bool = False  # the identity comes from the live map

    def step_to(self, identity: int, step: float) -> _Chosen:
        weight = _settled(self.weight + step)
        if identity != self.identity:
            if self.previous is not None and identity == self.previous:
                # Changed back mid-fade: the cross-fade runs backwards from where it is.
                mix = _settled(1.0 - self.mix + step)
                return _Chosen(weight, identity, None if mix == 1.0 else self.identity, mix)
            # A new cross-fade starts from whichever identity shows most now.
            shown = self.identity if self.previous is None or self.mix >= 0.5 else self.previous
            mix = _settled(step)
            return _Chosen(weight, identity, None if mix == 1.0 else shown, mix)
        if self.previous is None:
            return _Chosen(weight, identity)
        mix = _settled(self.mix + step)
        return _Chosen(weight, identity, None if mix == 1.0 else self.previous, mix)

    def fade_out(self, step: float) -> _Chosen:
        return _Chosen(self.weight - step, self.identity, self.previous, self.mix, self.mapped)


def _settled(share: float) -> float:
    """A share that a running sum of 1/fade_frames brought to 1 (0.9999999999999999 for 6, 7, 10
    ... frames: the fade took a frame more, swapping twice for nothing), capped at 1."""
    return 1.0 if share >= 1.0 - 1e-9 else share


def _unit(v: npt.ArrayLike) -> npt.NDArray[np.float32]:
    arr = np.asarray(v, dtype=np.float32).ravel()
    return arr / np.float32(max(float(np.linalg.norm(arr)), 1e-12))


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


__all__ = ["FaceAnalyser"]


def _holds(box: npt.ArrayLike, point: npt.NDArray[np.float32]) -> bool:
    x1, y1, x2, y2 = (float(v) for v in np.asarray(box, np.float32).ravel()[:4])
    return x1 <= float(point[0]) <= x2 and y1 <= float(point[1]) <= y2


def _centre_distance(box: npt.ArrayLike, point: npt.NDArray[np.float32]) -> float:
    x1, y1, x2, y2 = (float(v) for v in np.asarray(box, np.float32).ravel()[:4])
    return float(np.hypot((x1 + x2) / 2.0 - float(point[0]), (y1 + y2) / 2.0 - float(point[1])))
