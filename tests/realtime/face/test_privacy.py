"""The privacy fallback as a viewer sees it: while FaceCast is not sure a face is the person to swap,
"blur" shows that face pixelated (not as it is) and leaves everyone else alone; "hold" keeps the
swap on it for a moment. The cover is one step run on the host and the device backend alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from models.fakes.pixel_doubles import build_inswapper
from models.wrappers.dlib_recognizer import DlibRecognizer, dlib_available
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.engine import Engine
from realtime.core.metrics import Metrics
from realtime.core.settings import Settings, load_preset
from realtime.core.stage_set import StageSet, passthrough_stages
from realtime.face.privacy import Cover, PrivacyPlan, covers_of, pixelate
from realtime.face.swap_worker import FaceSwapWorker
from realtime.tools.bench_leaks import measure_scene
from realtime.tools.leak_scenes import build_scenes
from tests.engine_fakes import FakeSource, RecordingSink
from tests.real_faces import group_photo_bgr, group_photo_faces
from tests.realtime.face.test_device_backend import FACTORY, identity

needs_dlib = pytest.mark.skipif(not dlib_available(), reason="dlib / face-recognition-models not installed")


@pytest.fixture(scope="module")
def swapper_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("privacy")) / "inswapper_128.onnx"
    onnx.save(build_inswapper(), str(path))
    return path


def _inside(face_box: np.ndarray) -> tuple[slice, slice]:
    x1, y1, x2, y2 = (int(v) for v in face_box)
    cx, cy, r = (x1 + x2) // 2, (y1 + y2) // 2, (x2 - x1) // 4
    return slice(cy - r, cy + r), slice(cx - r, cx + r)


@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
def test_a_covered_face_is_pixelated_and_nobody_else_is_touched(swapper_file: Path, device: bool) -> None:
    """If this broke, a face FaceCast is unsure of would show as it is (or a bystander would be
    pixelated too)."""
    photo = group_photo_bgr()
    faces = group_photo_faces()
    covered, other = faces[2], faces[5]
    plan = PrivacyPlan(covers=[Cover(covered.kps, 7, "not confirmed yet")])
    worker = FaceSwapWorker(
        InSwapper.from_file(swapper_file, FACTORY),
        [identity(1)],
        Settings(),
        factory=FACTORY if device else None,
        device_graphs=True if device else None,
    )
    out = photo.copy()
    timings = worker.apply(out, plan, Settings())
    assert "cover" in timings
    ys, xs = _inside(covered.box)
    before, after = photo[ys, xs].astype(np.float32), out[ys, xs].astype(np.float32)
    assert np.abs(after - before).mean() > 4.0, "the unsure face shows as it is"
    # Pixelated: the face's fine detail is gone (neighbouring pixels mostly equal).
    assert np.abs(np.diff(after, axis=1)).mean() < 0.5 * np.abs(np.diff(before, axis=1)).mean()
    ys, xs = _inside(other.box)
    assert np.array_equal(out[ys, xs], photo[ys, xs]), "a face nobody is unsure of was changed"


def test_pixelate_keeps_the_colours_and_drops_the_detail() -> None:
    crop = np.random.default_rng(0).integers(0, 255, (128, 128, 3), dtype=np.uint8)
    out = pixelate(crop)
    assert out.shape == crop.shape
    assert len(np.unique(out.reshape(-1, 3), axis=0)) <= 64
    assert abs(float(out.mean()) - float(crop.mean())) < 2.0


def _privacy(fallback: str) -> Settings:
    return load_preset("privacy").with_overrides({"swap.recognizer": "dlib", "privacy.fallback": fallback})


@needs_dlib
def test_with_blur_a_face_coming_back_unconfirmed_is_covered_not_shown() -> None:
    """The person walks out of the picture and back in; the analysis runs the way it did before
    eager re-acquisition (the retry wait), so there are frames where they are back and not yet
    swapped. With "blur" those frames show them pixelated: fewer leaked frames than "original",
    and the plan says why each face is covered."""
    scene = build_scenes(["leaves and comes back"])[0]
    recognizer = DlibRecognizer()
    plans: list = []
    blurred = measure_scene(scene, recognizer, _privacy("blur"), eager=False, plans=plans)
    shown = measure_scene(scene, recognizer, _privacy("original"), eager=False)
    assert shown.leaked > blurred.leaked
    reasons = {c.reason for p in plans for c in covers_of(p)}
    assert reasons <= {"not confirmed yet", "fading in"} and reasons
    assert blurred.wrong_person == 0
    metrics = Metrics()
    said = set()
    for plan in plans:
        metrics.fallbacks(plan.fallbacks())
        said.add(metrics.snapshot().fallback_text())
    visible = {c.reason for p in plans for c in covers_of(p) if c.strength > 0.0}
    assert visible and {f"1 face in privacy fallback ({r})" for r in visible} <= said  # what --stats shows
    assert "" in said and metrics.snapshot().frames_in_fallback == sum(bool(p.fallbacks()) for p in plans)


def test_the_stats_say_which_faces_are_in_the_fallback_and_why() -> None:
    """The engine hands each analysed frame's fallback to the metrics: the --stats line says it
    while it lasts and drops it when the faces are swapped again."""
    kps = np.array([[40, 40], [60, 40], [50, 50], [42, 60], [58, 60]], dtype=np.float32)
    covered = 10

    class Analyser:
        frame = 0

        def analyse(self, image: np.ndarray, ts: float, s: Settings) -> PrivacyPlan:
            self.frame += 1
            if self.frame > covered:
                return PrivacyPlan()
            return PrivacyPlan(covers=[Cover(kps, 1, "not confirmed yet"), Cover(kps + 20, 2, "held")])

    lines: list[str] = []
    source, sink = FakeSource(frames=30), RecordingSink()
    engine = Engine(
        source, sink, Settings(), lambda s: StageSet(Analyser(), passthrough_stages(s).workers, "covers")
    )
    engine.subscribe_preview(lambda frame: lines.append(engine.metrics.snapshot().format_line()))
    engine.start()
    assert engine.wait(10)
    assert "2 faces in privacy fallback (not confirmed yet, held)" in lines[0]
    assert "privacy fallback" not in lines[-1]
    assert engine.metrics.snapshot().frames_in_fallback == covered


def test_the_privacy_preset_pixelates() -> None:
    assert load_preset("privacy").privacy.fallback == "blur"
    assert load_preset("balanced").privacy.fallback == "original"
