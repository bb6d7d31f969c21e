"""Several faces: each mapped person keeps their own identity (face A becomes X, face B becomes Y),
locked to their track through a crossing; faces that match no reference are left untouched; the
worker swaps each face with its own latent; `main.py run --map REF=SOURCE` end to end.

The video is insightface's group photo: two of its people slide past each other (tests/real_faces.py),
detected by the real MTCNN; identities come from the ArcFace double (an average-pooled projection of
the aligned crop), which tells these two people apart by a wide margin (cosine distance ~0.005 to
their own reference photo, ~0.6 to the other's), so the threshold here is 0.3.
"""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest

import main
from models.fakes.doubles import write_all
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.arcface import ArcFace
from models.wrappers.mtcnn import MTCNN
from models.wrappers.router import load_recognizer
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings, SettingsError
from realtime.face.analyser import FaceAnalyser, _Chosen
from realtime.face.model_api import AnalysisModels
from realtime.face.source_face import SourceIdentity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.face.targets import RECHECK_FRAMES, IdentityMapSelector
from realtime.face.tracker import TrackedFace
from tests.real_faces import (
    CrossingClip,
    astronaut_bgr,
    composite_two_faces_crossing,
    group_photo_bgr,
    group_photo_faces,
)

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
FACE_IDS = (5, 2)  # person 0 moves left -> right behind person 1
THRESHOLD = 0.3
F32 = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = Path(tmp_path_factory.mktemp("multi"))
    write_all(d)
    return d


@pytest.fixture(scope="module")
def recognizer(doubles: Path) -> ArcFace:
    return load_recognizer(doubles / "w600k_r50.onnx", FACTORY)


@pytest.fixture(scope="module")
def crossing() -> CrossingClip:
    return composite_two_faces_crossing(n_frames=30, face_ids=FACE_IDS)


def reference_photo(face_id: int) -> np.ndarray:
    """A photo of one person of the group: their face cut out with some margin, enlarged."""
    x1, y1, x2, y2 = (float(v) for v in group_photo_faces()[face_id].box)
    cx, cy, half = (x1 + x2) / 2, (y1 + y2) / 2, 1.3 * max(x2 - x1, y2 - y1)
    crop = group_photo_bgr()[int(cy - half) : int(cy + half), int(cx - half) : int(cx + half)]
    return np.asarray(cv2.resize(crop, None, fx=1.5, fy=1.5), dtype=np.uint8)


@pytest.fixture(scope="module")
def references(recognizer: ArcFace) -> dict[int, F32]:
    detector = MTCNN()
    out = {}
    for fid in FACE_IDS:
        photo = reference_photo(fid)
        face = max(detector.detect(photo), key=lambda d: d.area)
        out[fid] = recognizer.embed(photo, face.kps)
    return out


def person_of(kps: np.ndarray, clip: CrossingClip, i: int) -> int:
    errs = [float(np.linalg.norm(kps - t.kps[i], axis=1).mean()) for t in clip.tracks]
    assert min(errs) < 15.0 and min(errs) < 0.5 * max(errs), f"frame {i}: a target on neither face {errs}"
    return int(np.argmin(errs))


def mapped_settings(**extra: object) -> Settings:
    return Settings().with_overrides(
        {
            "swap.target": "mapped",
            "swap.reference_threshold": THRESHOLD,
            "detector.interval": 5,
            "tracker.max_missed": 8,
            **extra,
        }
    )


def run_analyser(
    recognizer: ArcFace, clip: CrossingClip, refs: list[F32]
) -> tuple[list[FramePlan], FaceAnalyser]:
    models = AnalysisModels(MTCNN(min_face_size=40), recognizer, "mtcnn")
    s = mapped_settings()
    analyser = FaceAnalyser(models, s, mapped_references=refs)
    return [analyser.analyse(frame, i / 30.0, s) for i, frame in enumerate(clip.frames)], analyser


# ------------------------------------------------------------------- analyser + selector, real clip


def test_each_mapped_person_keeps_their_identity_through_the_crossing(
    recognizer: ArcFace, crossing: CrossingClip, references: dict[int, F32]
) -> None:
    plans, _ = run_analyser(recognizer, crossing, [references[FACE_IDS[0]], references[FACE_IDS[1]]])
    tracks_of: dict[int, set[int]] = {1: set(), 2: set()}
    for i, plan in enumerate(plans):
        for target in plan.targets:
            person = person_of(target.kps, crossing, i) if target.weight >= 1.0 else None
            if person is not None:  # (a fading, coasting track behind the other face has no truth)
                assert target.identity == person + 1, (
                    f"frame {i}: person {person} got identity {target.identity}"
                )
            tracks_of[target.identity].add(target.track_id)
        both_visible = min(t.visible[i] for t in crossing.tracks) >= 0.99
        if both_visible and i >= 5:  # after the fade-in
            assert sorted(t.identity for t in plan.targets) == [1, 2], f"frame {i}"
    # Each identity stayed on one track: no swapping of identities when they crossed.
    assert all(len(ids) == 1 for ids in tracks_of.values()), tracks_of
    assert tracks_of[1] != tracks_of[2]


def test_a_face_that_matches_no_reference_is_left_alone(
    recognizer: ArcFace, crossing: CrossingClip, references: dict[int, F32]
) -> None:
    plans, _ = run_analyser(recognizer, crossing, [references[FACE_IDS[0]]])
    seen = 0
    for i, plan in enumerate(plans):
        for target in plan.targets:
            assert target.identity == 1
            if target.weight >= 1.0:
                assert person_of(target.kps, crossing, i) == 0, f"frame {i}: the unmapped person was swapped"
                seen += 1
    assert seen >= 15


def test_mapped_mode_without_references_is_a_settings_error(recognizer: ArcFace) -> None:
    with pytest.raises(SettingsError, match="no identity mapping") as err:
        FaceAnalyser(AnalysisModels(MTCNN(), recognizer, "mtcnn"), mapped_settings())
    assert "--map REF_PHOTO=SOURCE_PHOTO" in err.value.hint


def test_reference_mode_without_a_reference_photo_is_a_settings_error(recognizer: ArcFace) -> None:
    """It was a bare ValueError from deep in the engine: the CLI printed a traceback."""
    settings = Settings().with_overrides({"swap.target": "reference"})
    with pytest.raises(SettingsError, match="no reference photo") as err:
        FaceAnalyser(AnalysisModels(MTCNN(), recognizer, "mtcnn"), settings)
    assert "--reference PHOTO" in err.value.hint


def test_a_live_change_of_max_missed_reaches_the_selector_and_keeps_the_lock(recognizer: ArcFace) -> None:
    for target, extra in (("largest", {}), ("mapped", {})):
        settings = mapped_settings(**extra) if target == "mapped" else Settings()
        refs = [np.ones(512, dtype=np.float32)] if target == "mapped" else ()
        analyser = FaceAnalyser(
            AnalysisModels(MTCNN(), recognizer, "mtcnn"), settings, mapped_references=refs
        )
        selector = analyser._selector
        analyser.reconfigure(settings.with_overrides({"tracker.max_missed": 60}))
        assert analyser._selector is selector  # the same selector: its lock is kept
        assert selector.max_missed == 60 and analyser._tracker.settings.max_missed == 60


def test_a_live_detector_threshold_change_applies_at_once(recognizer: ArcFace) -> None:
    """The threshold is live (a reload would reset every track), but a mutation ignoring the
    change — in the tracker and in SCRFD — passed every test."""
    from models.fakes.detector_double import FaceSpec, build_scrfd, paint_face
    from models.wrappers.scrfd import SCRFD

    rel = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.33, 0.8], [0.67, 0.8]])
    face = FaceSpec((200.0, 150.0, 360.0, 350.0), rel * [160.0, 200.0] + [200.0, 150.0], 0.7)
    detector = SCRFD(FACTORY.create(build_scrfd([face]).SerializeToString(), "scrfd double"))
    low = Settings().with_overrides(
        {"detector.threshold": 0.5, "detector.interval": 1, "tracker.fade_frames": 0}
    )
    analyser = FaceAnalyser(AnalysisModels(detector, recognizer, "det_10g"), low)
    frame = paint_face(np.full((640, 640, 3), 90, np.uint8), face)
    assert [t.weight for t in analyser.analyse(frame, 0.0, low).targets] == [1.0]  # 0.7 >= 0.5: swapped
    high = low.with_overrides({"detector.threshold": 0.8})
    weights = [t.weight for f in range(1, 4) for t in analyser.analyse(frame, f / 30, high).targets]
    assert weights == []  # 0.7 < 0.8: passed through from the next frame on
    assert analyser._tracker.score_threshold == 0.8  # MTCNN has no threshold of its own: the tracker's
    weights = [t.weight for t in analyser.analyse(frame, 4 / 30, low).targets]
    assert weights == [1.0]  # and back, live


def test_embeddings_of_faces_that_left_are_forgotten(recognizer: ArcFace) -> None:
    """Kept per track id for the run, they grew with every face that ever passed (ids never repeat)."""
    photo = astronaut_bgr()
    s_ref = Settings().with_overrides(
        {"swap.target": "reference", "detector.interval": 1, "tracker.max_missed": 2}
    )
    reference = recognizer.embed(photo, MTCNN().detect(photo)[0].kps)
    analyser = FaceAnalyser(
        AnalysisModels(MTCNN(), recognizer, "mtcnn"), s_ref, reference_embedding=reference
    )
    for i in range(3):
        analyser.analyse(photo, i / 30, s_ref)
    assert len(analyser._embeddings) == 1
    blank = np.full_like(photo, 90)
    for i in range(3, 10):  # gone for longer than max_missed: the track is dropped
        analyser.analyse(blank, i / 30, s_ref)
    assert analyser._embeddings == {}


# ------------------------------------------------------------------------ selector arbitration


def _face(track_id: int, *, lost: int = 0, detected: bool = True) -> TrackedFace:
    box = np.array([track_id * 100.0, 0.0, track_id * 100.0 + 80.0, 80.0], dtype=np.float32)
    kps = np.tile(box[:2] + 40.0, (5, 1)).astype(np.float32)
    return TrackedFace(track_id, box, kps, kps.copy(), 0.99, 1.0, detected, 1.0, lost_frames=lost)


class Table:
    def __init__(self, table: dict[int, list[float]]) -> None:
        self.table = table
        self.calls: list[int] = []

    def __call__(self, face: TrackedFace) -> F32:
        self.calls.append(face.track_id)
        return np.array(self.table[face.track_id], dtype=np.float32)


def ids(picked: list[tuple[TrackedFace, int]]) -> dict[int, int]:
    return {f.track_id: k for f, k in picked}


def test_one_track_per_identity_closest_pair_first_and_embedded_once() -> None:
    x, y = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    sel = IdentityMapSelector([np.array(x), np.array(y)], 0.3)
    near_x, nearer_x, near_y = [1.0, 0.15, 0.0], [1.0, 0.05, 0.0], [0.1, 1.0, 0.0]
    embed = Table({1: near_x, 2: nearer_x, 3: near_y, 4: [0.0, 0.0, 1.0]})
    # Tracks 1 and 2 both look like X: the closer (2) gets X; 3 is Y; 4 matches nobody.
    assert ids(sel.select([_face(1), _face(2), _face(3), _face(4)], embed)) == {2: 0, 3: 1}
    assert sorted(embed.calls) == [1, 2, 3, 4]  # each face embedded once, not once per identity
    assert sel.locked_ids == (2, 3)


def test_a_held_lock_beats_a_closer_newcomer_and_is_released_when_lost_too_long() -> None:
    sel = IdentityMapSelector([np.array([1.0, 0.0])], 0.3, max_missed=2)
    embed = Table({1: [1.0, 0.2], 2: [1.0, 0.0]})
    assert ids(sel.select([_face(1)], embed)) == {1: 0}
    # A closer match walks in: the identity stays on its track (no jumping between people).
    assert ids(sel.select([_face(1), _face(2)], embed)) == {1: 0}
    for lost in (1, 2):
        assert ids(sel.select([_face(1, lost=lost, detected=False), _face(2)], embed)) == {1: 0}
    # Lost for longer than max_missed: the identity moves to the best face in view.
    assert ids(sel.select([_face(1, lost=3, detected=False), _face(2)], embed)) == {2: 0}


def test_a_redetected_track_that_is_someone_else_releases_the_identity() -> None:
    sel = IdentityMapSelector([np.array([1.0, 0.0]), np.array([0.0, 1.0])], 0.3)
    embed = Table({1: [1.0, 0.0], 2: [0.0, 1.0], 3: [1.0, 0.1]})
    assert ids(sel.select([_face(1), _face(2)], embed)) == {1: 0, 2: 1}
    # Track 1 is lost behind track 2 and found again, but the association put a stranger on it.
    sel.select([_face(1, lost=1, detected=False), _face(2)], embed)
    embed.table[1] = [-1.0, 0.2]
    # One look against it holds the identity; RECHECK_FRAMES later a second look lets go.
    for _ in range(RECHECK_FRAMES):
        assert ids(sel.select([_face(1), _face(2)], embed)) == {1: 0, 2: 1}
    assert ids(sel.select([_face(1), _face(2)], embed)) == {2: 1}
    assert sel.locked_ids == (None, 2)
    # The real person 0 walks back in on a new track: identity 0 follows them, 1 stays put.
    assert ids(sel.select([_face(1), _face(2), _face(3)], embed)) == {2: 1, 3: 0}


# ------------------------------------------------------------------------------- worker


def identity(seed: int) -> SourceIdentity:
    v = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return SourceIdentity(v / np.linalg.norm(v), ())


def test_the_worker_gives_each_face_its_own_identity(doubles: Path, crossing: CrossingClip) -> None:
    swapper = InSwapper.from_file(doubles / "inswapper_128.onnx", FACTORY)
    frame = crossing.frames[0]  # the two faces far apart
    kps = [t.kps[0] for t in crossing.tracks]
    s = Settings()
    people = [identity(1), identity(2), identity(3)]  # 0 = --source, 1 and 2 = two --map entries
    both = frame.copy()
    FaceSwapWorker(swapper, people, s).apply(
        both, FramePlan([SwapTarget(kps[0], 1.0, 1, identity=1), SwapTarget(kps[1], 1.0, 2, identity=2)]), s
    )
    for k, who in ((0, 1), (1, 2)):
        alone = frame.copy()
        FaceSwapWorker(swapper, people[who], s).apply(alone, FramePlan([SwapTarget(kps[k], 1.0, 1)]), s)
        region = (alone != frame).any(axis=2)
        assert region.sum() > 1000
        np.testing.assert_array_equal(both[region], alone[region])  # this face got identity `who` ...
        other = frame.copy()
        FaceSwapWorker(swapper, people[3 - who], s).apply(other, FramePlan([SwapTarget(kps[k], 1.0, 1)]), s)
        assert np.abs(both[region].astype(int) - other[region]).mean() > 5  # ... not the other one
    with pytest.raises(ValueError, match="identity 3"):
        FaceSwapWorker(swapper, people, s).apply(frame.copy(), FramePlan([SwapTarget(kps[0], 1.0, 1, 3)]), s)


def test_a_face_changing_identity_cross_fades_from_one_swap_to_the_other(
    doubles: Path, crossing: CrossingClip
) -> None:
    """A face given another identity (mapped mode) fades from the old swap to the new one instead
    of popping: each step moves it an even share of the way."""
    swapper = InSwapper.from_file(doubles / "inswapper_128.onnx", FACTORY)
    frame = crossing.frames[0]
    kps = crossing.tracks[0].kps[0]
    s = Settings()
    worker = FaceSwapWorker(swapper, [identity(1), identity(2), identity(3)], s)

    def swapped(target: SwapTarget) -> npt.NDArray[np.int16]:
        out = frame.copy()
        worker.apply(out, FramePlan([target]), s)
        return out.astype(np.int16)

    old, new = swapped(SwapTarget(kps, 1.0, 1, 1)), swapped(SwapTarget(kps, 1.0, 1, 2))
    region = (old != new).any(axis=2)
    assert region.sum() > 1000
    full = float(np.abs(new - old)[region].mean())
    for mix in (0.25, 0.5, 0.75):
        fading = swapped(SwapTarget(kps, 1.0, 1, 2, previous_identity=1, mix=mix))
        assert float(np.abs(fading - old)[region].mean()) == pytest.approx(mix * full, abs=0.05 * full)
    done = swapped(SwapTarget(kps, 1.0, 1, 2, previous_identity=1, mix=1.0))
    np.testing.assert_array_equal(done, new)
    with pytest.raises(ValueError, match="identity 5"):
        swapped(SwapTarget(kps, 1.0, 1, 2, previous_identity=5, mix=0.5))


def shares(c: _Chosen) -> dict[int, float]:
    """How much of each identity shows on a chosen face."""
    return {c.identity: 1.0} if c.previous is None else {c.previous: 1.0 - c.mix, c.identity: c.mix}


def test_changing_back_mid_fade_runs_the_fade_backwards_from_where_it_is() -> None:
    c = _Chosen(1.0, 1).step_to(2, 0.25).step_to(2, 0.25).step_to(2, 0.25)  # 75 % of the way to 2
    back = c.step_to(1, 0.25)
    assert (back.identity, back.previous) == (1, 2)
    assert shares(back)[1] == pytest.approx(0.5)  # one step back toward 1 (it showed 25 %), no jump
    assert back.step_to(1, 0.25).step_to(1, 0.25) == _Chosen(1.0, 1)
    assert _Chosen(1.0, 1).step_to(2, 0.25).step_to(1, 0.25) == _Chosen(1.0, 1)  # one step in, one back


def test_a_third_identity_mid_fade_starts_from_the_identity_that_shows_most() -> None:
    early = _Chosen(1.0, 1).step_to(2, 0.25)  # 75 % of 1 shows
    late = early.step_to(2, 0.25).step_to(2, 0.25)  # 75 % of 2 shows
    assert (early.step_to(3, 0.25).previous, late.step_to(3, 0.25).previous) == (1, 2)


def test_a_face_fading_out_mid_cross_fade_keeps_its_mix_and_resumes_it() -> None:
    c = _Chosen(1.0, 1).step_to(2, 0.25).fade_out(0.25)
    assert (c.weight, c.previous, c.mix) == (0.75, 1, 0.25)
    assert c.step_to(2, 0.25).mix == 0.5


@pytest.mark.parametrize("frames", range(1, 61))
def test_a_cross_fade_takes_exactly_fade_frames(frames: int) -> None:
    c, n = _Chosen(1.0, 1), 0
    while True:
        c, n = c.step_to(2, 1.0 / frames), n + 1
        if c.previous is None:
            break
    assert n == frames


class SwitchableRecognizer:
    """A recogniser double: every face looks like `who` (switched mid-run by the test)."""

    def __init__(self, who: F32) -> None:
        self.who = who

    def embed(self, image: np.ndarray, kps: np.ndarray) -> F32:
        return self.who.copy()


def identity_change(fade_frames: int) -> tuple[list[SwapTarget], list[SwapTarget]]:
    """The astronaut's face, mapped mode with two references: six frames looking like the first
    reference (identity 1), lost for a frame and found again looking like the second (the
    association put someone else on the track). The targets before and after the change."""
    x, y = np.eye(2, 8, dtype=np.float32)
    recognizer = SwitchableRecognizer(x)
    models = AnalysisModels(MTCNN(min_face_size=40), recognizer, "mtcnn")  # type: ignore[arg-type]
    s = mapped_settings(**{"detector.interval": 1, "tracker.fade_frames": fade_frames})
    analyser = FaceAnalyser(models, s, mapped_references=[x, y])
    frame = astronaut_bgr()
    before = [t for i in range(6) for t in analyser.analyse(frame, i / 30.0, s).targets]
    analyser.analyse(np.full_like(frame, 90), 6 / 30.0, s)
    recognizer.who = y
    plans = [analyser.analyse(frame, (i + 7) / 30.0, s) for i in range(3 * RECHECK_FRAMES)]
    assert all(len(p.targets) == 1 for p in plans)  # the face stays swapped throughout
    return before, [p.targets[0] for p in plans]


def test_a_face_judged_another_mapped_person_cross_fades_into_their_identity() -> None:
    before, after = identity_change(fade_frames=4)
    assert (before[-1].identity, before[-1].previous_identity, before[-1].weight) == (1, None, 1.0)
    assert all(t.weight > 0.0 for t in after)  # never dropped to the original face meanwhile
    steps = [(t.previous_identity, round(t.mix, 2)) for t in after if t.identity == 2]
    assert steps[:4] == [(1, 0.25), (1, 0.5), (1, 0.75), (None, 1.0)]


def test_fade_frames_zero_switches_identity_at_once() -> None:
    _, after = identity_change(fade_frames=0)
    seen = [(t.identity, t.previous_identity) for t in after]
    assert (2, None) in seen and all(prev is None for _, prev in seen)


# ---------------------------------------------------------------------------------- CLI


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main.main(list(args), out=out)
    return code, out.getvalue(), capsys.readouterr().err


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory, crossing: CrossingClip) -> dict[str, Path]:
    d = Path(tmp_path_factory.mktemp("photos"))
    files = {
        "frame": crossing.frames[0],
        "ref_a": reference_photo(FACE_IDS[0]),
        "ref_b": reference_photo(FACE_IDS[1]),
        "x": astronaut_bgr(),
        "y": astronaut_bgr()[:, ::-1].copy(),  # mirrored: a different embedding, still one face
    }
    paths = {}
    for name, image in files.items():
        paths[name] = d / f"{name}.png"
        cv2.imwrite(str(paths[name]), image)
    return paths


def cli_args(doubles: Path, photos: dict[str, Path], out: Path, *maps: str) -> list[str]:
    args = ["run", "--models-dir", str(doubles), "--allow-unverified", "--input", str(photos["frame"])]
    args += ["--output", str(out), "--detector", "mtcnn", "--set", f"swap.reference_threshold={THRESHOLD}"]
    # Off, so that two runs' pictures compare pixel for pixel (each run's mark carries its own id).
    args += ["--set", "tracker.fade_frames=0", "--set", "watermark.enabled=false"]
    for m in maps:
        args += ["--map", m]
    return args


def face_box(crossing: CrossingClip, k: int) -> tuple[slice, slice]:
    x1, y1, x2, y2 = crossing.tracks[k].boxes[0]
    return slice(int(y1), int(y2)), slice(int(x1), int(x2))


def test_cli_map_swaps_each_person_with_their_source(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    doubles: Path,
    photos: dict[str, Path],
    crossing: CrossingClip,
) -> None:
    frame = cv2.imread(str(photos["frame"]))
    out_both, out_one = tmp_path / "both.png", tmp_path / "one.png"
    both_maps = (f"{photos['ref_a']}={photos['x']}", f"{photos['ref_b']}={photos['y']}")
    code, _, err = run_cli(capsys, *cli_args(doubles, photos, out_both, *both_maps))
    assert code == 0, err
    code, _, err = run_cli(capsys, *cli_args(doubles, photos, out_one, both_maps[0]))
    assert code == 0, err
    both, one = cv2.imread(str(out_both)), cv2.imread(str(out_one))
    a, b = face_box(crossing, 0), face_box(crossing, 1)
    for face in (a, b):
        assert np.abs(both[face].astype(int) - frame[face]).mean() > 5, "a mapped face was not swapped"
    # Person A became X in both runs; person B, unmapped in the second run, is untouched there.
    np.testing.assert_array_equal(one[a], both[a])
    np.testing.assert_array_equal(one[b], frame[b])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--source", "me.png", "--map", "a.png=b.png"], "--source and --map cannot be combined"),
        (["--map", "a.png"], "must look like REF_PHOTO=SOURCE_PHOTO"),
        (["--map", "=b.png"], "must look like REF_PHOTO=SOURCE_PHOTO"),
        ([], "No source photo given"),
        (["--map", "a.png=b.png", "--reference", "c.png"], "--reference and --map cannot be combined"),
    ],
)
def test_cli_map_mistakes_give_one_line(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "run", "--input", "in.png", "--output", "out.png", *extra)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], err
