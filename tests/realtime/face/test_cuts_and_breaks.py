"""Scene cuts and broken tracks, as a viewer sees them: no ghost swap left on the old shot, the new
shot swapped at once, no slide from the old face to the new one, a fade that ends before its track
is dropped, and detections that are not faces (NaN, empty) ignored.

Real pictures (insightface's group photo) so the optical flow is real; scripted detections at the
faces' known landmarks so each test knows the truth exactly.
"""

from __future__ import annotations

import itertools

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from models.types import Detection, ImageBGR
from realtime.core.settings import Settings, TrackerSettings
from realtime.face.analyser import FaceAnalyser
from realtime.face.model_api import AnalysisModels
from realtime.face.tracker import FaceTracker, TrackedFace
from tests.real_faces import group_photo_bgr, group_photo_faces

FPS = 30.0
SIZE = (640, 480)
F32 = npt.NDArray[np.float32]


def render(person: int, centre: tuple[float, float], scale: float = 1.0) -> tuple[ImageBGR, Detection]:
    """The group photo moved so that `person`'s face centre is at `centre`; its exact detection."""
    photo, faces = group_photo_bgr(), group_photo_faces()
    face = faces[person]
    c = face.kps.astype(np.float64).mean(axis=0)
    m = np.array([[scale, 0.0, centre[0] - scale * c[0]], [0.0, scale, centre[1] - scale * c[1]]])
    frame = np.ascontiguousarray(cv2.warpAffine(photo, m, SIZE, borderMode=cv2.BORDER_REFLECT))
    kps = (face.kps.astype(np.float64) @ m[:, :2].T + m[:, 2]).astype(np.float32)
    box = (face.box.reshape(2, 2).astype(np.float64) @ m[:, :2].T + m[:, 2]).reshape(4).astype(np.float32)
    return frame, Detection(box, kps, 0.99)


def err(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64), axis=1).mean())


class Scripted:
    """A detector answering each frame from a script (the loop sets `frame`)."""

    def __init__(self) -> None:
        self.frame = 0
        self.script: dict[int, list[Detection]] = {}

    def __call__(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
        return list(self.script.get(self.frame, []))

    detect = __call__


class SameEmbedding:
    def embed(self, image: ImageBGR, kps: npt.ArrayLike) -> F32:
        return np.ones(512, np.float32)


# ----------------------------------------------------------------------------- scene cuts


@pytest.mark.parametrize("target", ["largest", "all"])
def test_a_cut_leaves_no_ghost_and_the_new_shot_is_swapped_at_once(target: str) -> None:
    det = Scripted()
    s = Settings().with_overrides({"swap.target": target})
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    cut = 10
    for i in range(cut + 6):
        # Person 2 at the left, then a cut to person 4 (a smaller face) far to the right.
        frame, d = render(2, (200, 240)) if i < cut else render(4, (540, 240), 0.6)
        det.script[i] = [d]
        det.frame = i
        plan = analyser.analyse(frame, i / FPS, s)
        if i >= cut:
            # Only the new face: no swap left fading at the old place over the new picture, and the
            # new face whole from the cut frame on (waiting for the old track or for the lock's
            # regain left it unswapped for over a second).
            assert [round(t.weight, 3) for t in plan.targets] == [1.0], f"frame {i}"
            assert err(plan.targets[0].kps, d.kps) < 1.0, f"frame {i}"
    assert analyser._tracker.cuts == 1


def test_a_cut_to_someone_framed_alike_starts_a_new_track_with_no_slide() -> None:
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=5)
    ids = []
    for i in range(16):
        frame, d = render(2, (320, 240)) if i < 8 else render(5, (330, 245), 1.1)
        det.script[i] = [d]
        det.frame = i
        faces = tracker.update(frame, i / FPS)
        assert len(faces) == 1
        ids.append(faces[0].track_id)
        if i >= 8:
            # The smoothing dragged the swap from the old face to the new one over 3 frames
            # (12, 5 and 2 px off) when the new face continued the old track.
            assert err(faces[0].kps, d.kps) < 0.5, f"frame {i}"
    assert ids[7] != ids[8] and len(set(ids[8:])) == 1
    assert tracker.cuts == 1


@pytest.mark.parametrize(
    "change",
    ["black frame", "exposure +45", "exposure x1.4", "exposure x0.5"],
)
def test_a_black_frame_or_an_exposure_step_is_not_a_cut(change: str) -> None:
    """A webcam's auto-exposure step or one black frame cleared the tracks as a 'cut': the swap
    dropped for several frames, and in "largest" mode the lock could jump to another face."""
    det = Scripted()
    s = Settings()
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    frame, d = render(2, (320, 240))
    changed = {
        "black frame": np.zeros_like(frame),
        "exposure +45": cv2.add(frame, 45),
        "exposure x1.4": cv2.convertScaleAbs(frame, alpha=1.4),
        "exposure x0.5": cv2.convertScaleAbs(frame, alpha=0.5),
    }[change]
    step = 10
    det.script = {i: [d] for i in range(20) if not (change == "black frame" and i == step)}
    weights = []
    for i in range(20):
        det.frame = i
        plan = analyser.analyse(
            changed if i == step or (change != "black frame" and i > step) else frame, i / FPS, s
        )
        weights.append([round(t.weight, 2) for t in plan.targets])
        assert [t.track_id for t in plan.targets] in ([1], []), f"frame {i}: {plan.targets}"
    assert analyser._tracker.cuts == 0
    assert all(w == [1.0] for w in weights[step + 1 :]), weights  # swapped again at once


def test_a_covered_face_is_not_a_cut() -> None:
    """Only most of the picture changing is a cut: a hand over the face keeps the track's id."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=5)
    frame, d = render(2, (320, 240))
    covered = frame.copy()
    x1, y1, x2, y2 = (int(v) for v in d.box)
    cv2.rectangle(covered, (x1 - 30, y1 - 30), (x2 + 30, y2 + 30), (40, 40, 40), thickness=-1)
    det.script = {i: [d] for i in range(4)} | {i: [d] for i in range(8, 12)}
    ids = set()
    for i in range(12):
        det.frame = i
        faces = tracker.update(covered if 4 <= i < 8 else frame, i / FPS)
        ids |= {f.track_id for f in faces}
    assert tracker.cuts == 0 and ids == {1}


# ----------------------------------------------------------------------------- broken tracks


def test_a_face_found_where_its_flow_failed_is_not_dragged_by_the_smoothing() -> None:
    """Another face pasted where the first one was (the rest of the picture unchanged: no cut).
    The detector continues the track (same place), the flow fails on the new face: the landmarks
    are the detector's at once, and the track says it was reacquired (so identity is re-checked)."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=5)
    frame, d = render(2, (320, 240))
    other, d_other = render(5, (320, 240))
    x1, y1, x2, y2 = (int(v) for v in d.box)
    swapped_in = frame.copy()
    swapped_in[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20] = other[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20]
    moved = Detection(d_other.box + 4.0, d_other.kps + 4.0, 0.99)
    change = 8
    for i in range(change + 3):
        det.script[i] = [d if i < change else moved]
        det.frame = i
        faces = tracker.update(frame if i < change else swapped_in, i / FPS)
        assert len(faces) == 1 and faces[0].track_id == 1
        if i == change:
            assert faces[0].detected and faces[0].reacquired
            assert err(faces[0].kps, moved.kps) < 0.5
        elif i > change:
            assert not faces[0].reacquired
    assert tracker.cuts == 0


def test_detections_that_are_not_faces_are_ignored() -> None:
    """NaN landmarks poisoned the track they matched (NaN swap, a lock on nothing); a NaN box
    failed the whole frame's analysis; an empty box started ghost tracks."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=1)
    frame, d = render(2, (320, 240))
    nan_kps = Detection(d.box.copy(), np.full((5, 2), np.nan, np.float32), 0.99)
    nan_box = Detection(np.array([np.nan, 0, 10, 10], np.float32), d.kps.copy(), 0.99)
    nan_score = Detection(d.box + 200.0, d.kps + 200.0, float("nan"))
    empty = Detection(np.array([50, 50, 50, 90], np.float32), d.kps - 100.0, 0.99)
    for i in range(6):
        det.script[i] = [d] if i < 2 else [nan_kps, nan_box, nan_score, empty, d]
        det.frame = i
        faces = tracker.update(frame, i / FPS)
        assert [f.track_id for f in faces] == [1], f"frame {i}"
        assert np.all(np.isfinite(faces[0].kps)) and np.all(np.isfinite(faces[0].box))
        assert faces[0].swap_weight >= min(1.0, (i + 1) / TrackerSettings().fade_frames)


@pytest.mark.parametrize(("fade_frames", "max_missed"), [(12, 5), (4, 5), (8, 2), (6, 0)])
def test_a_lost_face_fades_out_completely_before_its_track_is_dropped(
    fade_frames: int, max_missed: int
) -> None:
    """The detector stops finding a face the flow still follows: its swap fades to nothing before
    the track is dropped (a 12-frame fade with max_missed 5 popped off at 0.58), and it is not
    dimmed before its fade begins."""
    det = Scripted()
    settings = TrackerSettings(fade_frames=fade_frames, max_missed=max_missed)
    tracker = FaceTracker(det, settings, interval=1)
    frame, d = render(2, (320, 240))
    det.script = {i: [d] for i in range(fade_frames + 2)}  # fully faded in, then never found again
    weights = []
    for i in range(3 * fade_frames + max_missed + 6):
        det.frame = i
        faces = tracker.update(frame, i / FPS)
        weights.append(faces[0].swap_weight if faces else None)
    present = [w for w in weights if w is not None]
    assert present[fade_frames + 1] == 1.0
    assert present[-1] == 0.0, f"dropped at weight {present[-1]}: {weights}"
    assert max(abs(b - a) for a, b in itertools.pairwise(present)) <= 1.0 / fade_frames + 1e-9
    assert weights[-1] is None  # and it was dropped


def test_one_missed_detection_of_a_face_the_flow_follows_does_not_dim_it() -> None:
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=1)
    frame, d = render(2, (320, 240))
    det.script = {i: [d] for i in range(12) if i != 8}
    weights = []
    for i in range(12):
        det.frame = i
        weights.append(tracker.update(frame, i / FPS)[0].swap_weight)
    assert weights[4:] == [1.0] * 8


# ----------------------------------------------------------------------------- metrics


def test_faces_with_landmarks_no_swap_can_align_count_as_passed_through() -> None:
    """The worker skips a mirrored set of landmarks; the plan counted it as swapped."""
    det = Scripted()
    s = Settings().with_overrides({"swap.target": "all", "tracker.enabled": False})
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    frame, d = render(2, (200, 240))
    _, d2 = render(4, (460, 240))
    mirrored = Detection(d2.box, d2.kps[[1, 0, 2, 4, 3]], 0.99)
    det.script = {i: [d, mirrored] for i in range(6)}
    plan = None
    for i in range(6):
        det.frame = i
        plan = analyser.analyse(frame, i / FPS, s)
    assert plan is not None
    assert len(plan.targets) == 1 and err(plan.targets[0].kps, d.kps) < 1.0
    assert plan.passthrough == 1


@pytest.mark.parametrize("target", ["largest", "all"])
def test_a_face_below_the_detector_threshold_counts_as_passed_through(target: str) -> None:
    """'largest' no longer locks on such a face, which then went uncounted (the run's end said
    nothing about why nothing was swapped)."""
    det = Scripted()
    s = Settings().with_overrides({"swap.target": target})
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    frame, d = render(2, (320, 240))
    faint = Detection(d.box, d.kps, 0.3)
    det.script = {i: [faint] for i in range(5)}
    for i in range(5):
        det.frame = i
        plan = analyser.analyse(frame, i / FPS, s)
        assert plan.targets == [] and plan.passthrough == 1 and plan.faces == 1


# ----------------------------------------------------------------------------- second review


def shifted_and_smeared(frame: ImageBGR, dx: int, dy: int, smear: int) -> ImageBGR:
    """The camera knocked: the picture jumps (dx, dy) and is motion-blurred over `smear` px."""
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    moved = cv2.warpAffine(frame, m, (frame.shape[1], frame.shape[0]), borderMode=cv2.BORDER_REFLECT)
    kernel = np.zeros((smear, smear), np.float32)
    kernel[smear // 2, :] = 1.0 / smear
    return np.asarray(cv2.filter2D(moved, -1, kernel), np.uint8)


@pytest.mark.parametrize(("dx", "dy", "smear"), [(45, 15, 21), (60, 20, 31), (30, 10, 1), (90, 30, 21)])
def test_a_knocked_camera_is_not_a_cut_and_the_lock_stays(dx: int, dy: int, smear: int) -> None:
    """A 90 px jolt at 720p with a smear (here at 640 px: half) was taken for a cut: in "largest"
    mode the swap moved to the other, larger face for good."""
    det = Scripted()
    s = Settings().with_overrides({"detector.interval": 3})
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    frame, user = render(2, (200, 240))
    _, other = render(4, (480, 240), 1.3)  # another person, larger, who came in later
    det.script = {i: [user] for i in range(4)} | {i: [user, other] for i in range(4, 30)}
    jolt = 12
    locked = []
    for i in range(30):
        det.frame = i
        image = shifted_and_smeared(frame, dx, dy, smear) if i == jolt else frame
        plan = analyser.analyse(image, i / FPS, s)
        locked.append(sorted(t.track_id for t in plan.targets))
    assert analyser._tracker.cuts == 0
    assert all(ids in ([1], []) for ids in locked), locked
    assert locked[-1] == [1]


def test_a_new_shot_without_a_face_on_its_first_frame_is_searched_at_every_frame() -> None:
    """With no track left after a cut, the next detection waited for the interval (6 frames in
    ultra-low-latency), and the face of the new shot stayed unswapped meanwhile."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=6)
    before, d_before = render(2, (200, 240))
    after, d_after = render(4, (420, 240), 0.8)
    cut = 8
    found_at = None
    for i in range(cut + 6):
        det.frame = i
        det.script[i] = [d_before] if i < cut else ([] if i == cut else [d_after])  # a blurred first frame
        faces = tracker.update(before if i < cut else after, i / FPS)
        if i > cut and faces and found_at is None:
            found_at = i
    assert tracker.cuts == 1 and found_at == cut + 1


def test_someone_framed_alike_without_a_cut_loses_the_reference_swap() -> None:
    """Another person where the reference person was, the backdrop unchanged (no cut): the track
    id carried on, and the stranger kept the swap for the whole shot."""
    det = Scripted()
    reference = np.zeros(512, np.float32)
    reference[0] = 1.0
    frame, d = render(2, (320, 240))
    other, d_other = render(5, (320, 240))
    x1, y1, x2, y2 = (int(v) for v in d.box)
    swapped_in = frame.copy()
    swapped_in[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20] = other[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20]
    change = 10

    class Recogniser:
        def embed(self, image: ImageBGR, kps: npt.ArrayLike) -> F32:
            vec = np.zeros(512, np.float32)
            vec[0 if det.frame < change else 1] = 1.0
            return vec

    s = Settings().with_overrides({"swap.target": "reference", "detector.interval": 3})
    analyser = FaceAnalyser(AnalysisModels(det, Recogniser(), "scripted"), s, reference_embedding=reference)
    moved = Detection(d_other.box + 3.0, d_other.kps + 3.0, 0.99)
    swapped = []
    for i in range(change + 30):
        det.frame = i
        det.script[i] = [d if i < change else moved]
        plan = analyser.analyse(frame if i < change else swapped_in, i / FPS, s)
        swapped.append(bool(plan.targets))
    assert analyser._tracker.cuts == 0
    assert all(swapped[4:change])
    gone = next(i for i in range(change, len(swapped)) if not swapped[i])
    assert gone <= change + 3 + 10 + 4  # a detection, two looks RECHECK_FRAMES apart, the fade
    assert not any(swapped[gone:])


def test_a_hand_over_the_face_keeps_the_smoothing() -> None:
    """A face found where its flow failed, at the same place (a hand passing over it fails the flow
    on every frame), had its smoothing reset at every frame: the detector's noise came through."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=1)
    frame, d = render(2, (320, 240))
    rng = np.random.default_rng(3)
    x1, y1, x2, y2 = (int(v) for v in d.box)
    raw, out = [], []
    for i in range(40):
        det.frame = i
        noisy = Detection(d.box, (d.kps + rng.normal(0, 1.0, d.kps.shape)).astype(np.float32), 0.99)
        det.script[i] = [noisy]
        image = frame.copy()
        if i >= 10:  # fingers over the face: a new pattern every frame, so the flow fails
            image[y1:y2, x1:x2] = rng.integers(0, 255, (y2 - y1, x2 - x1, 3), dtype=np.uint8)
        faces = tracker.update(image, i / FPS)
        if i >= 15:
            raw.append(noisy.kps)
            out.append(faces[0].kps)
    assert np.std(np.array(out), axis=0).mean() < 0.7 * np.std(np.array(raw), axis=0).mean()


def test_after_a_cover_taken_for_a_cut_largest_goes_back_to_the_face_where_the_target_was() -> None:
    """Something filling the picture at once (a hand on the lens, someone stepping in front) reads
    as a cut; choosing the largest face afterwards gave a larger bystander the swap for good."""
    from realtime.tools.bench import astronaut_bgr

    det = Scripted()
    s = Settings().with_overrides({"detector.interval": 3})
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)
    frame, user = render(2, (200, 240))
    _, other = render(4, (480, 240), 1.3)  # larger, came in later
    cover = cv2.resize(astronaut_bgr(), SIZE)
    det.script = {i: [user] for i in range(4)} | {i: [user, other] for i in range(4, 30)}
    det.script[12] = det.script[13] = []
    swapped = []
    for i in range(30):
        det.frame = i
        plan = analyser.analyse(cover if i in (12, 13) else frame, i / FPS, s)
        swapped.append([err(t.kps, user.kps) < 2.0 for t in plan.targets])
    assert analyser._tracker.cuts >= 1  # the cover did read as a cut
    assert all(hits == [True] for hits in swapped[15:]), swapped


def test_a_lost_face_is_dropped_even_with_min_quality_zero() -> None:
    """Past max_missed a track fades out and goes; with min_quality 0 it stayed for good (a ghost
    swap where the person had been, in "all" mode)."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(min_quality=0.0), interval=1)
    frame, d = render(2, (320, 240))
    det.script = {i: [d] for i in range(10)}
    faces = []
    for i in range(40):
        det.frame = i
        faces = tracker.update(frame, i / FPS)
    assert faces == []


def test_after_a_cut_to_an_empty_shot_the_search_ends_and_the_interval_resumes() -> None:
    """After a cut the detector runs on every frame for a few frames only: a countdown that never
    ended ran it on every empty frame for the rest of the run (the frame rate of a CPU collapsed
    whenever nobody was in the picture)."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=3)
    before, d = render(2, (200, 240))
    after, _ = render(4, (420, 240), 0.8)
    for i in range(8):
        det.script[i] = [d]
    runs_at_cut = 0
    for i in range(30):
        det.frame = i
        tracker.update(before if i < 8 else after, i / FPS)  # the new shot has no face found
        if i == 8:
            assert tracker.cuts == 1
            runs_at_cut = tracker.detections_run
    # Searched on the cut's next `interval` frames, then on the schedule: one run per 3 frames.
    assert tracker.detections_run - runs_at_cut <= 3 + (30 - 9 - 3) // 3 + 1


def test_a_face_below_the_threshold_found_on_a_cut_is_not_swapped() -> None:
    """A cut starts tracks at full weight, but not for a detection the threshold turns down: a
    swap flashed onto a poster and faded out."""
    det = Scripted()
    s = Settings()
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)  # type: ignore[arg-type]
    for i in range(14):
        frame, d = render(2, (200, 240)) if i < 10 else render(4, (540, 240), 0.6)
        det.script[i] = [d if i < 10 else Detection(d.box, d.kps, 0.3)]
        det.frame = i
        plan = analyser.analyse(frame, i / FPS, s)
        if i >= 10:
            assert plan.targets == [], f"frame {i}: {plan.targets}"
    assert analyser._tracker.cuts == 1


def test_a_lens_cap_dark_noisy_frame_is_not_a_cut() -> None:
    """A covered lens (dark, sensor noise only) is no new shot: the tracks wait for the face."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=1)
    frame, d = render(2, (320, 240))
    cap = np.clip(np.random.default_rng(0).normal(10, 3, frame.shape), 0, 255).astype(np.uint8)
    for i in range(12):
        det.frame = i
        det.script[i] = [] if i == 6 else [d]
        tracker.update(cap if i == 6 else frame, i / FPS)
    assert tracker.cuts == 0


def test_a_face_whose_tracking_holds_keeps_its_track_when_the_rest_of_the_picture_changes() -> None:
    """Someone passing close to the lens covers one of two faces and most of the picture: that is
    no new shot while the other face is still followed (a cut dropped every track, and the face
    tracked all along lost its id and its lock)."""
    det = Scripted()
    tracker = FaceTracker(det, TrackerSettings(), interval=3)
    frame, d2 = render(2, (200, 240))
    shift = d2.kps.astype(np.float64).mean(axis=0) - group_photo_faces()[2].kps.astype(np.float64).mean(
        axis=0
    )
    face3 = group_photo_faces()[3]
    d3 = Detection(
        face3.box + np.tile(shift, 2).astype(np.float32), face3.kps + shift.astype(np.float32), 0.99
    )
    x1, y1, x2, y2 = (int(v) for v in d3.box)
    covered = render(4, (420, 240), 0.8)[0]  # the passer-by: another picture over all but face 3
    covered[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20] = frame[y1 - 20 : y2 + 20, x1 - 20 : x2 + 20]

    def id_of_face3(faces: list[TrackedFace]) -> int:
        near = [f for f in faces if err(f.kps, d3.kps) < 10.0]
        assert len(near) == 1, [err(f.kps, d3.kps) for f in faces]
        return near[0].track_id

    for i in range(9):
        det.frame = i
        det.script[i] = [d2, d3]
        faces = tracker.update(frame, i / FPS)
    before = id_of_face3(faces)
    for i in range(9, 14):
        det.frame = i
        det.script[i] = [d3]
        faces = tracker.update(covered, i / FPS)
        assert id_of_face3(faces) == before, f"frame {i}"
    assert tracker.cuts == 0


def test_a_face_the_detector_lost_is_not_counted_as_passed_through() -> None:
    """The passthrough count says why a face in view was left alone; a face that is only lost
    (covered, gone from the picture) while its track waits to be found again is not one of them."""
    det = Scripted()
    s = Settings().with_overrides(
        {"tracker.min_quality": 0.9, "tracker.max_missed": 20, "detector.interval": 1}
    )
    analyser = FaceAnalyser(AnalysisModels(det, SameEmbedding(), "scripted"), s)  # type: ignore[arg-type]
    frame, d = render(2, (320, 240))
    blank = np.full_like(frame, 128)  # a covered lens: no texture to follow, and no new shot
    faded_while_lost = 0
    for i in range(20):
        det.frame = i
        det.script[i] = [d] if i < 6 else []
        plan = analyser.analyse(frame if i < 6 else blank, i / FPS, s)
        if i >= 6:
            assert plan.passthrough == 0, f"frame {i}"
            faded_while_lost += plan.faces == 1 and not plan.targets
    assert faded_while_lost > 0  # the lost face was still in the plan, faded to nothing
