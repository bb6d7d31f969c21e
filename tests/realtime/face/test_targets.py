"""Target selection: the chosen face stays the swapped one when other faces enter, cross or leave.

The real test drives the real MTCNN + tracker over two people from insightface's group photo sliding
past each other (one hides behind the other at mid-clip). ArcFace weights are not available in CI,
so "reference" mode uses a deterministic stand-in embedding: the ArcFace-aligned 112 px crop,
shrunk to 16x16 grey and mean-removed. It tells these two people apart by a wide margin (cosine
distance ~0.05 to the same person's photo, ~0.55 to the other), which is all the selector needs.
"""

from __future__ import annotations

import itertools
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from models.ops.align import norm_crop
from models.types import Detection, ImageBGR
from models.wrappers.mtcnn import MTCNN
from realtime.core.settings import TrackerSettings
from realtime.face.targets import RECHECK_FRAMES, TargetSelector, cosine_distance
from realtime.face.tracker import FaceTracker, TrackedFace
from tests.real_faces import CrossingClip, composite_two_faces_crossing, group_photo_bgr, group_photo_faces

FPS = 30.0
F32 = npt.NDArray[np.float32]
# face_ids[0] moves left -> right and passes BEHIND face_ids[1]: the hard case for a lock.
FACE_IDS = (5, 2)
REFERENCE_THRESHOLD = 0.3


def stand_in_embedding(image: ImageBGR, kps: npt.ArrayLike) -> F32:
    crop, _ = norm_crop(image, kps, 112)
    inner = crop[16:104, 16:96]  # eyes to chin, little background or hair
    small = cv2.resize(inner, (16, 16), interpolation=cv2.INTER_AREA)
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.float32).ravel()
    grey -= grey.mean()
    return grey / np.float32(np.linalg.norm(grey))


class CountingEmbedder:
    """The per-frame embedder the selector is given; counts how often it really runs."""

    def __init__(self, frame_ref: list[ImageBGR]) -> None:
        self.frame_ref = frame_ref  # [current frame], set by the loop
        self.calls = 0

    def __call__(self, face: TrackedFace) -> F32:
        self.calls += 1
        return stand_in_embedding(self.frame_ref[0], face.kps)


@pytest.fixture(scope="module")
def crossing() -> CrossingClip:
    return composite_two_faces_crossing(n_frames=30, face_ids=FACE_IDS)


@pytest.fixture(scope="module")
def tracked(crossing: CrossingClip) -> list[list[TrackedFace]]:
    """The tracker's output for every frame of the crossing clip (K = 5, real MTCNN)."""
    # The face behind is fully hidden for ~5 frames; max_missed 8 keeps its track alive across.
    tracker = FaceTracker(MTCNN(min_face_size=40).detect, TrackerSettings(max_missed=8), interval=5)
    return [tracker.update(frame, i / FPS) for i, frame in enumerate(crossing.frames)]


def _identity(face: TrackedFace, clip: CrossingClip, i: int) -> int:
    """Which person of the clip (0 or 1) a tracked face sits on, by the ground-truth landmarks."""
    errs = [float(np.linalg.norm(face.kps - t.kps[i], axis=1).mean()) for t in clip.tracks]
    # A half-hidden face's detection is off by up to ~10 px; the two faces are >= 90 px apart then.
    ok = min(errs) < 15.0 and min(errs) < 0.5 * max(errs)
    assert ok, f"frame {i}: track {face.track_id} is on neither face (errors {errs} px)"
    return int(np.argmin(errs))


def _run(
    selector: TargetSelector, clip: CrossingClip, tracked: list[list[TrackedFace]]
) -> tuple[list[list[TrackedFace]], CountingEmbedder]:
    frame_ref: list[ImageBGR] = [clip.frames[0]]
    embed = CountingEmbedder(frame_ref)
    chosen = []
    for i, faces in enumerate(tracked):
        frame_ref[0] = clip.frames[i]
        chosen.append(selector.select(faces, embed))
    return chosen, embed


def _assert_locked_on(person: int, chosen: list[list[TrackedFace]], clip: CrossingClip) -> set[int]:
    ids: set[int] = set()
    for i, picked in enumerate(chosen):
        assert len(picked) <= 1
        if clip.tracks[person].visible[i] >= 0.99:
            assert picked, f"frame {i}: the target is in full view but not swapped"
        for face in picked:
            if face.lost_frames == 0:  # a coasting track is behind the other face: no truth to check
                assert _identity(face, clip, i) == person, f"frame {i}: the swap jumped to the other face"
            ids.add(face.track_id)
    return ids


def test_largest_locks_on_the_initial_largest_through_the_crossing(
    crossing: CrossingClip, tracked: list[list[TrackedFace]]
) -> None:
    first = max(tracked[0], key=lambda f: f.area)
    person = _identity(first, crossing, 0)
    chosen, embed = _run(TargetSelector("largest", max_missed=8), crossing, tracked)
    ids = _assert_locked_on(person, chosen, crossing)
    assert ids == {first.track_id}, f"the target changed track id: {ids}"
    assert embed.calls == 0  # "largest" never needs an identity
    overtaken = 0
    for faces in tracked:
        areas = {f.track_id: f.area for f in faces}
        if first.track_id in areas and any(a > areas[first.track_id] for a in areas.values()):
            overtaken += 1
    print(
        f"\nlargest: locked on person {FACE_IDS[person]} (track {first.track_id}); "
        f"the other face's box was the larger one on {overtaken}/{len(tracked)} frames"
    )


@pytest.mark.parametrize("person", [0, 1])
def test_reference_locks_on_the_matching_person_through_the_crossing(
    person: int, crossing: CrossingClip, tracked: list[list[TrackedFace]]
) -> None:
    face = group_photo_faces()[FACE_IDS[person]]
    reference = stand_in_embedding(group_photo_bgr(), face.kps)
    other = stand_in_embedding(group_photo_bgr(), group_photo_faces()[FACE_IDS[1 - person]].kps)
    assert cosine_distance(reference, other) > REFERENCE_THRESHOLD + 0.2  # the stand-in separates them

    selector = TargetSelector("reference", reference, REFERENCE_THRESHOLD, max_missed=8)
    chosen, embed = _run(selector, crossing, tracked)
    ids = _assert_locked_on(person, chosen, crossing)
    assert len(ids) == 1, f"the reference person changed track id: {ids}"
    assert selector.locked_id in ids
    # Embedded once per new or re-detected track, plus a second look now and then at the face
    # judged to be someone else; never per frame (30 frames, 2 people).
    n_tracks = len({f.track_id for faces in tracked for f in faces})
    print(
        f"\nreference person {FACE_IDS[person]}: embedder ran {embed.calls} times over "
        f"{len(tracked)} frames ({n_tracks} tracks)"
    )
    assert embed.calls <= n_tracks + 2 + len(tracked) // selector.retry_frames
    # The embedding used is on the returned face, for the swapper's identity checks downstream.
    assert all(f.embedding is not None for picked in chosen for f in picked)


def test_all_swaps_both_faces(crossing: CrossingClip, tracked: list[list[TrackedFace]]) -> None:
    chosen, embed = _run(TargetSelector("all"), crossing, tracked)
    for i, picked in enumerate(chosen):
        assert picked == tracked[i]
        if min(t.visible[i] for t in crossing.tracks) >= 0.99:
            assert {_identity(f, crossing, i) for f in picked} == {0, 1}, f"frame {i}"
    assert embed.calls == 0


# --------------------------------------------------------------------------- selector logic


def _face(
    track_id: int,
    size: float,
    *,
    lost: int = 0,
    detected: bool = True,
    x: float = 0.0,
    weight: float = 1.0,
    reacquired: bool = False,
) -> TrackedFace:
    box = np.array([x, 0.0, x + size, size], dtype=np.float32)
    kps = np.tile(np.array([x + size / 2, size / 2], dtype=np.float32), (5, 1))
    return TrackedFace(
        track_id, box, kps, kps.copy(), 0.99, 1.0, detected, weight, lost_frames=lost, reacquired=reacquired
    )


def _never(face: TrackedFace) -> F32:
    raise AssertionError("the embedder must not run in this mode")


def test_largest_stays_locked_when_another_face_becomes_larger_or_enters() -> None:
    sel = TargetSelector("largest", max_missed=3)
    assert [f.track_id for f in sel.select([_face(1, 100), _face(2, 80)], _never)] == [1]
    # Face 2 walks towards the camera and is now twice as large; a third face enters, larger still.
    assert [f.track_id for f in sel.select([_face(1, 100), _face(2, 200)], _never)] == [1]
    assert [f.track_id for f in sel.select([_face(3, 300), _face(1, 90), _face(2, 220)], _never)] == [1]
    assert sel.locked_id == 1


def test_largest_repicks_only_when_the_locked_track_is_gone_or_lost_too_long() -> None:
    sel = TargetSelector("largest", max_missed=2, regain_frames=3)
    sel.select([_face(1, 100), _face(2, 80)], _never)
    # Lost (behind something) for up to max_missed frames: still the target, nobody else.
    for lost in (1, 2):
        assert [f.track_id for f in sel.select([_face(1, 100, lost=lost), _face(2, 150)], _never)] == [1]
    # Lost for longer: nobody is swapped while it may come back (face 2 was there all along and
    # was not chosen) ...
    for lost in (3, 4):
        assert sel.select([_face(1, 100, lost=lost), _face(2, 150)], _never) == []
    # ... and when it does not, the largest face in view is chosen and locked.
    assert [f.track_id for f in sel.select([_face(1, 100, lost=5), _face(2, 150)], _never)] == [2]
    assert [f.track_id for f in sel.select([_face(1, 100), _face(2, 150)], _never)] == [2]


def test_a_face_hidden_by_someone_passing_in_front_gets_its_swap_back() -> None:
    """Someone crossing in front for 0.2 s took the swap for good: the tracker dropped the hidden
    face's track, and the lock went to the face in front, which was never the target."""
    sel = TargetSelector("largest", max_missed=2)
    assert [f.track_id for f in sel.select([_face(1, 120, x=100), _face(2, 80, x=300)], _never)] == [1]
    # 1 is hidden: the tracker drops it; 2 passes where it was.
    for _ in range(5):
        assert sel.select([_face(2, 80, x=120)], _never) == []
    # 1 is found again as a new track (3) near where it was: the swap goes back to that person.
    assert [f.track_id for f in sel.select([_face(2, 80, x=300), _face(3, 120, x=110)], _never)] == [3]


def test_a_locked_face_that_left_is_replaced_after_the_wait() -> None:
    sel = TargetSelector("largest", max_missed=2, regain_frames=4)
    sel.select([_face(1, 120), _face(2, 80, x=400)], _never)
    picks = [[f.track_id for f in sel.select([_face(2, 80, x=400)], _never)] for _ in range(6)]
    assert picks == [[], [], [], [2], [2], [2]]


def test_no_faces_no_target() -> None:
    sel = TargetSelector("largest")
    assert sel.select([], _never) == []
    assert sel.locked_id is None


class TableEmbedder:
    """Embeddings looked up by track id; records which track ids it was asked for."""

    def __init__(self, table: dict[int, list[float]]) -> None:
        self.table = table
        self.calls: list[int] = []

    def __call__(self, face: TrackedFace) -> F32:
        self.calls.append(face.track_id)
        return np.array(self.table[face.track_id], dtype=np.float32)


def test_reference_embeds_new_and_redetected_tracks_only() -> None:
    me, other = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    embed = TableEmbedder({1: other, 2: me})
    # No second looks here (the faces stand apart: neither comes into clearer view).
    sel = TargetSelector("reference", np.array(me), 0.3, retry_frames=100)
    for _ in range(10):
        picked = sel.select([_face(1, 100), _face(2, 90, x=300, detected=False)], embed)
        # Track 2 was never seen by the detector yet (cannot happen with FaceTracker, but the
        # selector must not embed a flow-carried crop as a first impression).
    assert picked == [] and embed.calls == [1]
    for _ in range(10):
        picked = sel.select([_face(1, 100), _face(2, 90, x=300)], embed)
        assert [f.track_id for f in picked] == [2]
    assert embed.calls == [1, 2]
    # Lost, then found again by the detector: embedded once more (the id may now be someone else).
    sel.select([_face(1, 100), _face(2, 90, x=300, lost=1, detected=False)], embed)
    sel.select([_face(1, 100), _face(2, 90, x=300)], embed)
    assert embed.calls == [1, 2, 2]
    # Found where its flow failed (a hand crossing the face) is not a reason: poor looks through the
    # fingers would let go of the person.
    for _ in range(5):
        sel.select([_face(1, 100), _face(2, 90, x=300, reacquired=True)], embed)
    assert embed.calls == [1, 2, 2]


def test_a_face_judged_someone_else_is_looked_at_again_now_and_then() -> None:
    """The first look at the reference person was poor (entering half out of frame): they are
    looked at again, one face per frame, the wait doubling while looks say someone else (three
    bystanders cost ArcFace runs for ever), and swapped once a look says it is them."""
    me, other, third = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    embed = TableEmbedder({1: other, 2: third})
    sel = TargetSelector("reference", np.array(me), 0.3, retry_frames=15)
    frames_of: dict[int, list[int]] = {1: [], 2: []}
    for frame in range(300):
        before = len(embed.calls)
        assert sel.select([_face(1, 100), _face(2, 90, x=300)], embed) == []
        for track in embed.calls[before:]:
            frames_of[track].append(frame)
    for track, frames in frames_of.items():
        gaps = [b - a for a, b in itertools.pairwise(frames)]
        assert frames[0] == 0 and len(gaps) >= 2, (track, frames)
        # Waits of 15, 30, 60, then 60 frames (2 s) at most (a frame more when the other face had
        # the frame's look): a person whose first looks were poor waited up to 8 s in full view.
        assert all(min(15 * 2**k, 60) <= gap <= min(15 * 2**k, 60) + 1 for k, gap in enumerate(gaps)), gaps
    embed.table[1] = me  # now in full view
    picked = []
    for _ in range(130):
        picked = sel.select([_face(1, 100), _face(2, 90, x=300)], embed)
        if picked:
            break
    assert [f.track_id for f in picked] == [1]
    # Coasting (not detected) faces are never looked at: their landmarks are the flow's.
    calls = len(embed.calls)
    for _ in range(300):
        sel.select([_face(1, 100), _face(2, 90, x=300, lost=1, detected=False)], embed)
    assert embed.calls[calls:].count(2) == 0


def test_reference_unlocks_when_a_redetected_track_turns_out_to_be_someone_else() -> None:
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({7: me})
    sel = TargetSelector("reference", np.array(me), 0.3)
    assert [f.track_id for f in sel.select([_face(7, 100)], embed)] == [7]
    sel.select([_face(7, 100, lost=1, detected=False)], embed)
    embed.table[7] = other  # the association put another person on track 7
    # One look against it holds the lock (a hand still half over the face); RECHECK_FRAMES later
    # it is looked at again, and two in a row let go.
    held = [sel.select([_face(7, 100)], embed) for _ in range(RECHECK_FRAMES)]
    assert all([f.track_id for f in picked] == [7] for picked in held)
    assert sel.select([_face(7, 100)], embed) == []
    assert sel.locked_id is None
    assert embed.calls == [7, 7, 7]


def test_a_switch_to_someone_else_soon_after_a_look_is_still_looked_at() -> None:
    """The tracker reports the break (reacquired) on one frame only: a face looked at less than
    RECHECK_FRAMES before it was never looked at again, and the stranger kept the swap."""
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({7: me})
    sel = TargetSelector("reference", np.array(me), 0.3)
    sel.select([_face(7, 100)], embed)  # looked at on its first frame
    for _ in range(2):
        sel.select([_face(7, 100)], embed)
    embed.table[7] = other  # someone else, framed alike, where the flow failed
    sel.select([_face(7, 100, reacquired=True)], embed)
    released = None
    for frame in range(40):
        if not sel.select([_face(7, 100)], embed):
            released = frame
            break
    assert released is not None and released <= 2 * RECHECK_FRAMES
    assert sel.locked_id is None


def test_one_poor_look_at_the_locked_person_does_not_drop_the_lock() -> None:
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({7: me})
    sel = TargetSelector("reference", np.array(me), 0.3)
    sel.select([_face(7, 100)], embed)
    sel.select([_face(7, 100, lost=1, detected=False)], embed)
    embed.table[7] = other  # found again with a hand over half the face
    assert [f.track_id for f in sel.select([_face(7, 100)], embed)] == [7]
    embed.table[7] = me  # the hand is gone by the next look
    for _ in range(40):
        assert [f.track_id for f in sel.select([_face(7, 100)], embed)] == [7]
    assert embed.calls == [7, 7, 7]  # and a face found to be the person is not looked at again


def test_reference_needs_an_embedding_and_a_matching_length() -> None:
    with pytest.raises(ValueError, match="reference"):
        TargetSelector("reference", None)
    sel = TargetSelector("reference", np.ones(4), 0.3)
    with pytest.raises(ValueError, match="length"):
        sel.select([_face(1, 100)], lambda f: np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="non-zero"):
        TargetSelector("reference", np.zeros(4))


# ------------------------------------------------------------- a change of target fades, never pops


def _scripted_face(cx: float, cy: float, size: float) -> Detection:
    template = np.array([[-0.35, -0.3], [0.35, -0.3], [0, 0.05], [-0.28, 0.4], [0.28, 0.4]], np.float32)
    kps = template * size + np.array([cx, cy], np.float32)
    box = np.array([cx - size / 2, cy - size * 0.6, cx + size / 2, cy + size * 0.6], np.float32)
    return Detection(box, kps, 0.99)


class _Scene:
    """A (larger) face A that leaves at frame `a_leaves` and a face B that is always there."""

    def __init__(self, a_leaves: int = 10**9) -> None:
        self.frame = 0
        self.a_leaves = a_leaves

    def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
        faces = [_scripted_face(420, 240, 60)]
        if self.frame < self.a_leaves:
            faces.insert(0, _scripted_face(200, 240, 120))
        return faces


def _weights(analyser: Any, scene: _Scene, s: Any, frames: range) -> list[dict[int, float]]:
    image = np.full((480, 640, 3), 90, np.uint8)
    out = []
    for i in frames:
        scene.frame = i
        plan = analyser.analyse(image, i / 30, s)
        out.append({t.track_id: round(t.weight, 2) for t in plan.targets})
    return out


def test_a_new_target_fades_in_when_the_locked_one_leaves() -> None:
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    class Same:
        def embed(self, image: ImageBGR, kps: Any) -> npt.NDArray[np.float32]:
            return np.ones(512, np.float32)

    scene = _Scene(a_leaves=10)
    s = Settings()  # "largest", 4 fade frames
    weights = _weights(FaceAnalyser(AnalysisModels(scene, Same(), "scripted"), s), scene, s, range(60))
    b_frames = [w[2] for w in weights if 2 in w]
    assert b_frames[:4] == [0.25, 0.5, 0.75, 1.0]  # B, already fully tracked, was pasted at 1.0 at once
    first_b = next(i for i, w in enumerate(weights) if 2 in w)
    assert first_b >= 10 + 20  # not before A has had its chance to come back (about a second)


def test_a_target_that_turns_out_to_be_someone_else_fades_out() -> None:
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    reference = np.zeros(512, np.float32)
    reference[0] = 1.0

    class Hidden(_Scene):
        """A is hidden for frames 8-9 (a hand); the face found there again is someone else."""

        def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
            faces = super().detect(image, max_faces)
            return faces[1:] if self.frame in (8, 9) else faces

    class Embeddings:
        def embed(self, image: ImageBGR, kps: Any) -> npt.NDArray[np.float32]:
            vec = np.zeros(512, np.float32)
            is_a = float(np.asarray(kps)[2, 0]) < 300
            vec[0 if is_a and scene.frame < 8 else 1] = 1.0
            return vec

    scene = Hidden()
    s = Settings().with_overrides({"swap.target": "reference", "detector.interval": 1})
    analyser = FaceAnalyser(AnalysisModels(scene, Embeddings(), "scripted"), s, reference_embedding=reference)
    a_weights = [w.get(1, 0.0) for w in _weights(analyser, scene, s, range(32))]
    assert a_weights[7] == 1.0 and a_weights[-1] == 0.0
    # Two looks say someone else (the second RECHECK_FRAMES after the first): then it fades out,
    # not gone in one frame.
    released = next(i for i in range(11, 32) if a_weights[i] < a_weights[i - 1] and a_weights[i - 1] == 1.0)
    assert released <= 10 + RECHECK_FRAMES + 1
    fading = a_weights[released : released + 4]
    assert fading[0] > 0.0 and fading == sorted(fading, reverse=True)


def test_a_threshold_or_swap_model_change_keeps_the_locked_face() -> None:
    """Moving the reference-threshold slider, or picking the fp16 swapper, rebuilt the selector:
    the swap cross-faded to whoever was largest at that moment."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    class Same:
        def embed(self, image: ImageBGR, kps: Any) -> npt.NDArray[np.float32]:
            return np.ones(512, np.float32)

    class Grows(_Scene):
        """A is larger at first; from frame 5 B leans in and is larger."""

        def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
            b_size = 60 if self.frame < 5 else 160
            return [_scripted_face(200, 240, 120), _scripted_face(460, 240, b_size)]

    scene = Grows()
    s = Settings()
    analyser = FaceAnalyser(AnalysisModels(scene, Same(), "scripted"), s)
    before = _weights(analyser, scene, s, range(10))
    locked = set(before[-1])
    assert len(locked) == 1
    for change in ({"swap.reference_threshold": 0.55}, {"swap.model": "inswapper_128_fp16"}):
        s = s.with_overrides(change)
        after = _weights(analyser, scene, s, range(10, 16))
        assert all(set(w) == locked for w in after), (change, after)


def test_a_target_found_again_under_a_new_id_gets_the_swap_back_at_once() -> None:
    """A fast mover got a new track while the old one coasted; that new track was counted as a
    bystander and the target went unswapped for the whole wait."""
    sel = TargetSelector("largest", max_missed=1)
    assert [f.track_id for f in sel.select([_face(1, 120, x=100), _face(2, 80, x=500)], _never)] == [1]
    # The target jumps: the detector finds it as track 3 far away while track 1 coasts, then 1 is
    # dropped. While it only coasts the lock waits for it: a face walking past near the target
    # during one missed detection must not take the lock (and make the target a bystander).
    assert [
        f.track_id
        for f in sel.select([_face(1, 120, x=100, lost=1), _face(2, 80, x=500), _face(3, 120, x=300)], _never)
    ] == [1]
    assert [f.track_id for f in sel.select([_face(2, 80, x=500), _face(3, 120, x=300)], _never)] == [3]


def test_reference_hands_a_lost_lock_to_the_person_confirmed_elsewhere() -> None:
    """In reference mode the embedding proves who a new track is: no need to wait out the lost one."""
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({1: me, 2: other, 3: me})
    sel = TargetSelector("reference", np.array(me), 0.3, max_missed=5)
    assert [f.track_id for f in sel.select([_face(1, 100), _face(2, 90, x=300)], embed)] == [1]
    picked = sel.select(
        [_face(1, 100, lost=1, detected=False), _face(2, 90, x=300), _face(3, 100, x=500)], embed
    )
    assert [f.track_id for f in picked] == [3]


def test_largest_never_locks_on_a_face_that_is_not_swapped() -> None:
    """A larger detection below the detector threshold (weight 0: passed through) held the lock
    and nothing was swapped."""
    sel = TargetSelector("largest")
    faint = _face(1, 200, x=0, weight=0.0)
    picked = sel.select([faint, _face(2, 100, x=300)], _never)
    assert [f.track_id for f in picked] == [2]


def test_after_the_tracker_starts_afresh_the_target_is_found_again_at_once() -> None:
    """Another picture gives every face a new id: the one where the target was takes the lock."""
    sel = TargetSelector("largest", max_missed=1)
    sel.select([_face(1, 120), _face(2, 80, x=400)], _never)
    assert [f.track_id for f in sel.select([_face(5, 100, x=20), _face(6, 90, x=420)], _never)] == [5]


def test_a_stranger_walking_in_elsewhere_while_the_target_is_hidden_does_not_get_the_swap() -> None:
    sel = TargetSelector("largest", max_missed=1, regain_frames=3)
    sel.select([_face(1, 120, x=100)], _never)
    assert sel.select([_face(7, 150, x=1200)], _never) == []  # far from where the target was
    assert sel.select([_face(7, 150, x=1200)], _never) == []
    assert [f.track_id for f in sel.select([_face(7, 150, x=1200)], _never)] == [7]  # after the wait


def test_bystanders_get_no_second_looks_while_the_person_is_locked() -> None:
    """Six people in view cost 3-4 ArcFace runs a second for the whole run, with the person found."""
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({1: me, 2: other, 3: other, 4: other})
    sel = TargetSelector("reference", np.array(me), 0.3)
    faces = [_face(1, 100), _face(2, 90, x=200), _face(3, 90, x=400), _face(4, 90, x=600)]
    for _ in range(300):
        assert [f.track_id for f in sel.select(faces, embed)] == [1]
    assert sorted(embed.calls) == [1, 2, 3, 4]  # each looked at once, on arrival


def test_a_copy_of_the_person_in_view_all_along_does_not_take_a_lost_lock() -> None:
    """A poster or a reflection of the person took the swap for good when the detector missed the
    real face for one frame."""
    me = [1.0, 0.0]
    embed = TableEmbedder({1: me, 2: me})
    sel = TargetSelector("reference", np.array(me), 0.3, max_missed=5)
    real, poster = _face(1, 100), _face(2, 60, x=400)
    sel.select([real, poster], embed)  # the closer match (both equal here): track 1, chosen first
    assert sel.locked_id == 1
    sel.select([_face(1, 100, lost=1, detected=False), poster], embed)
    assert sel.locked_id == 1
    assert [f.track_id for f in sel.select([real, poster], embed)] == [1]


def test_reference_chooses_the_closest_of_two_matching_faces() -> None:
    """A sibling within the threshold must not win over the person themselves."""
    me = np.array([1.0, 0.0, 0.0])
    embed = TableEmbedder({1: [0.8, 0.6, 0.0], 2: me.tolist()})  # 1: distance 0.2, within 0.3
    sel = TargetSelector("reference", me, 0.3)
    picked = sel.select([_face(1, 120), _face(2, 90, x=300)], embed)
    assert [f.track_id for f in picked] == [2]


def test_a_face_reacquired_once_gets_one_second_look_not_one_every_recheck() -> None:
    """ArcFace runs once more after a break, not every RECHECK_FRAMES for as long as it is tracked."""
    me = [1.0, 0.0, 0.0]
    embed = TableEmbedder({1: me})
    sel = TargetSelector("reference", np.array(me), 0.3)
    sel.select([_face(1, 100)], embed)
    sel.select([_face(1, 100, reacquired=True)], embed)
    for _ in range(100):
        sel.select([_face(1, 100)], embed)
    assert embed.calls == [1, 1]


def test_the_place_preferred_after_a_cut_is_used_once() -> None:
    """After a cut "largest" prefers the face where the target was; once chosen, a later choice
    (that face gone) takes the largest face again, not whatever stands at the old place. (No
    regain window here: that waits for the target near its own last place, by design.)"""
    sel = TargetSelector("largest", max_missed=2, regain_frames=0)
    assert [f.track_id for f in sel.select([_face(1, 100, x=0.0), _face(2, 60, x=400.0)], _never)] == [1]
    sel.new_shot()
    # The new shot: a small face where the target was, a larger one elsewhere: the old place wins.
    assert [f.track_id for f in sel.select([_face(3, 80, x=10.0), _face(4, 150, x=400.0)], _never)] == [3]
    # Face 3 leaves for good; a small face 5 comes to the old place: the largest (4) is chosen.
    for lost in (1, 2, 3):  # (face 4 is out of view meanwhile)
        sel.select([_face(3, 80, x=10.0, lost=lost, detected=False)], _never)
    picked = sel.select([_face(4, 150, x=400.0), _face(5, 70, x=10.0)], _never)
    assert [f.track_id for f in picked] == [4]


class _Same:
    def embed(self, image: ImageBGR, kps: Any) -> npt.NDArray[np.float32]:
        return np.ones(512, np.float32)


def test_switching_the_target_mode_live_swaps_every_face() -> None:
    """ "largest" -> "all" while running: the second face is swapped within the fade, without a
    restart (the selector of the old mode kept choosing one face)."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    scene = _Scene()
    s = Settings()
    analyser = FaceAnalyser(AnalysisModels(scene, _Same(), "scripted"), s)
    assert len(_weights(analyser, scene, s, range(10))[-1]) == 1
    s_all = s.with_overrides({"swap.target": "all"})
    after = _weights(analyser, scene, s_all, range(10, 10 + s.tracker.fade_frames + 2))
    assert len(after[-1]) == 2 and all(w == 1.0 for w in after[-1].values()), after


def test_switching_to_reference_mode_live_without_a_photo_is_refused() -> None:
    from models.errors import FaceCastError
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    scene = _Scene()
    s = Settings()
    analyser = FaceAnalyser(AnalysisModels(scene, _Same(), "scripted"), s)
    _weights(analyser, scene, s, range(3))
    with pytest.raises(FaceCastError, match="reference"):
        _weights(analyser, scene, s.with_overrides({"swap.target": "reference"}), range(3, 4))


def test_the_reference_threshold_slider_applies_live() -> None:
    """A face at cosine distance 0.5 from the reference photo: not swapped at a 0.4 threshold;
    raising the slider to 0.6 while running swaps it (the selector kept the old threshold)."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    class HalfWay:  # cosine distance 0.5 to the reference [1, 0]
        def embed(self, image: ImageBGR, kps: Any) -> npt.NDArray[np.float32]:
            return np.array([0.5, np.sqrt(0.75)], np.float32)

    scene = _Scene(a_leaves=0)  # one face
    s = Settings().with_overrides(
        {"swap.target": "reference", "swap.reference_threshold": 0.4, "detector.interval": 1}
    )
    analyser = FaceAnalyser(
        AnalysisModels(scene, HalfWay(), "scripted"), s, reference_embedding=np.array([1.0, 0.0], np.float32)
    )
    assert all(w == {} for w in _weights(analyser, scene, s, range(10)))
    raised = _weights(analyser, scene, s.with_overrides({"swap.reference_threshold": 0.6}), range(10, 50))
    assert raised[-1] and all(v == 1.0 for v in raised[-1].values()), raised[-5:]


def test_a_live_detection_interval_change_changes_how_often_faces_are_detected() -> None:
    """ "Detect every N frames" is live (no reload): lowering it from 10 to 1 for fast motion must
    detect on every frame from then on."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    class Counting(_Scene):
        calls = 0

        def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
            self.calls += 1
            return [_scripted_face(300, 240, 120)]

    scene = Counting()
    s = Settings().with_overrides({"detector.interval": 10})
    analyser = FaceAnalyser(AnalysisModels(scene, _Same(), "scripted"), s)
    image = cv2.GaussianBlur(
        np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8), (0, 0), 3
    )
    for i in range(20):
        analyser.analyse(image, i / 30, s)
    assert scene.calls <= 3
    before = scene.calls
    every = s.with_overrides({"detector.interval": 1})
    for i in range(20, 40):
        analyser.analyse(image, i / 30, every)
    assert scene.calls - before >= 19


def test_a_cut_while_the_target_is_hidden_swaps_the_new_shots_face_at_once() -> None:
    """ "largest", the target hidden (the selector waiting for it near its last place), then a cut:
    the new shot's face is the target at once. The wait for the old shot's place carried over, and
    the new face stayed unswapped for about a second."""
    sel = TargetSelector("largest", max_missed=2)
    sel.select([_face(1, 120, x=100), _face(2, 80, x=600)], _never)
    sel.select([_face(2, 80, x=600)], _never)  # 1 is gone: waiting for it to come back
    sel.new_shot()
    assert [f.track_id for f in sel.select([_face(7, 100, x=1200)], _never)] == [7]


def test_of_two_new_faces_where_the_lost_target_was_the_larger_takes_it_back() -> None:
    """The target (a face in front) gets a new track at its place, and so does a small face behind
    it (a photo on the wall, someone far back): the swap goes back to the target, not the small one."""
    sel = TargetSelector("largest", max_missed=1)
    sel.select([_face(1, 120, x=100)], _never)
    sel.select([], _never)  # gone: waiting near its place
    picked = sel.select([_face(6, 40, x=140), _face(5, 115, x=104)], _never)
    assert [f.track_id for f in picked] == [5]


def test_the_target_fades_in_once_and_a_bystander_walking_out_is_not_passed_through() -> None:
    """A new target's swap comes in over the tracker's fade (0.25, 0.5, 0.75, 1 at 4 fade frames),
    not over two fades multiplied (0.06, 0.25, ...: the swap showed up late). A bystander leaving
    the picture is not counted as a face passed through (the metric counts faces the swap had to
    skip, which this one never was)."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    class Leaving(_Scene):
        def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
            faces = [_scripted_face(200, 240, 120)]  # the target, always there
            if self.frame < 10:
                faces.append(_scripted_face(460, 240, 60))  # a bystander who leaves at frame 10
            return faces

    scene = Leaving()
    s = Settings().with_overrides({"detector.interval": 1})
    analyser = FaceAnalyser(AnalysisModels(scene, _Same(), "scripted"), s)
    image = np.full((480, 640, 3), 90, np.uint8)
    passed_through, weights = [], []
    for i in range(30):
        scene.frame = i
        plan = analyser.analyse(image, i / 30, s)
        passed_through.append(plan.passthrough)
        weights.append(round(next((t.weight for t in plan.targets if t.track_id == 1), 0.0), 2))
    assert weights[:5] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert passed_through == [0] * 30


def test_the_held_lock_gets_its_second_look_before_a_face_found_again() -> None:
    """One ArcFace second look per frame: when the locked person (after one poor look) and a face
    the detector found again are due together, the lock's look comes first (it decides whether the
    swap stays on the person), the other the frame after."""
    me, other = [1.0, 0.0], [0.0, 1.0]
    embed = TableEmbedder({7: me, 8: other})
    sel = TargetSelector("reference", np.array(me), 0.3)
    sel.select([_face(7, 100), _face(8, 90, x=300)], embed)
    sel.select([_face(7, 100, lost=1, detected=False), _face(8, 90, x=300, lost=1, detected=False)], embed)
    embed.table[7] = other  # the person found again with a hand over half the face: a poor look
    assert [f.track_id for f in sel.select([_face(7, 100), _face(8, 90, x=300)], embed)] == [7]
    embed.table[7] = me
    embed.calls.clear()
    for _ in range(RECHECK_FRAMES + 2):
        sel.select([_face(7, 100), _face(8, 90, x=300, reacquired=True)], embed)
    assert embed.calls == [7, 8]


def test_the_dlib_threshold_applies_live_and_a_recogniser_change_waits_for_the_next_load() -> None:
    """A run that identifies people with dlib uses dlib's threshold, live; switching the recogniser
    in the window does not swap the models under a running analysis, so its threshold (ArcFace's
    0.6, which would let dlib match anyone) must not apply until the next load."""
    from realtime.core.settings import Settings
    from realtime.face.analyser import FaceAnalyser
    from realtime.face.model_api import AnalysisModels

    scene = _Scene()
    s = Settings().with_overrides(
        {"swap.target": "reference", "swap.recognizer": "dlib", "swap.dlib_threshold": 0.07}
    )
    analyser = FaceAnalyser(
        AnalysisModels(scene, _Same(), "scripted"), s, reference_embedding=np.ones(512, np.float32)
    )
    image = np.zeros((480, 640, 3), dtype=np.uint8)
    analyser.analyse(image, 0.0, s)
    assert analyser._selector.threshold == pytest.approx(0.07)
    s = s.with_overrides({"swap.dlib_threshold": 0.05})
    analyser.analyse(image, 1 / 30, s)
    assert analyser._selector.threshold == pytest.approx(0.05)
    s = s.with_overrides({"swap.recognizer": "arcface"})
    analyser.analyse(image, 2 / 30, s)
    assert analyser._selector.threshold == pytest.approx(0.05)
