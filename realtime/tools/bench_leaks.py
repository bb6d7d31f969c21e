"""`main.py bench --leaks`: how often a face that should be swapped is shown as it is.

Per scene (realtime/tools/leak_scenes.py, real photos), the analysis runs with a real recogniser and
each frame's plan is checked against the truth:

* leaked: a face that should be swapped is clearly in view (the detector alone finds it on that
  frame) and is not swapped (no target on it, or one mostly faded: weight < 0.5) nor covered by
  the privacy fallback (privacy.fallback "blur"/"hold", e.g. preset "privacy"). Counted per
  reappearance (each run of frames in clear view) and reported as the worst one.
* wrong person: a swap drawn on a face that should not get that identity.
* cost: the analysis's ms per frame (detect, track, select and the recogniser's looks).

Each scene runs twice: as shipped, and as before (a face judged someone else waited out the retry
for another look, and a missing person was searched for on the detection schedule only), so the
figure shows what faster re-acquisition costs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TextIO

import numpy as np

from models.types import Detection, ImageBGR
from realtime.core.contracts import FramePlan
from realtime.core.settings import DEFAULT_PRESET, Settings, load_preset
from realtime.face.analyser import FaceAnalyser
from realtime.face.model_api import AnalysisModels, FaceDetector, Recognizer
from realtime.face.privacy import covers_of
from realtime.tools.leak_scenes import (
    SCENE_NAMES,
    FaceTruth,
    Scene,
    ScriptedDetector,
    build_scenes,
    group_landmarks,
    group_photo,
)

SHOWN = 0.5  # a swap weight below this shows mostly the original face
ON_FACE = 0.15  # a target within this share of the face's size (landmark error) is on that face
MIN_SEEN = 0.25  # a face less in view than this is not "clearly in view", whatever is detected there


@dataclass(frozen=True, slots=True)
class LeakFigures:
    scene: str
    reappearances: int
    worst_leak: int  # leaked frames of the worst reappearance
    leaked: int  # leaked frames in all
    wrong_person: int
    looks: int  # recogniser runs
    ms_per_frame: float
    frames: int


def _err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64), axis=1).mean())


def _size(face: FaceTruth) -> float:
    return float(max(face.box[2] - face.box[0], face.box[3] - face.box[1]))


def _owner(kps: np.ndarray, truth: Sequence[FaceTruth]) -> FaceTruth | None:
    """The person whose face a target's landmarks are on (None: on nobody's)."""
    near = [(t, _err(kps, t.kps)) for t in truth]
    near = [(t, e) for t, e in near if e <= ON_FACE * _size(t)]
    return min(near, key=lambda te: te[1])[0] if near else None


class _Counting:
    """Counts the recogniser's runs."""

    def __init__(self, inner: Recognizer) -> None:
        self.inner = inner
        self.calls = 0

    def embed(self, image_bgr: ImageBGR, kps: object) -> np.ndarray:
        self.calls += 1
        return self.inner.embed(image_bgr, kps)  # type: ignore[arg-type]


class _FrameDetector:
    """The pipeline's detector for one scene: scripted from the truth, or a real one (memoised per
    frame, so the 'found by the detector alone' check costs the pipeline nothing)."""

    def __init__(self, scene: Scene, real: FaceDetector | None) -> None:
        self.scripted = ScriptedDetector(scene)
        self.real = real
        self._memo: dict[int, list[Detection]] = {}

    def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
        if self.real is None:
            return self.scripted.detect(image, max_faces)
        i = self.scripted.frame
        if i not in self._memo:
            self._memo[i] = self.real.detect(image, max_faces)
        return [Detection(d.box.copy(), d.kps.copy(), d.score) for d in self._memo[i]]

    def clear(self, i: int, face: FaceTruth) -> bool:
        """Whether the detector alone finds this face on frame i."""
        if self.real is None:
            return face.found_by_scripted_detector()
        if face.visible < MIN_SEEN:
            return False  # a detection there is of the face in front of it
        self.scripted.frame = i
        found = self.detect(self.scripted.scene.frames[i])
        return any(_owner(d.kps, self.scripted.scene.truth[i]) is face for d in found)


def measure_scene(
    scene: Scene,
    recognizer: Recognizer,
    settings: Settings,
    *,
    detector: FaceDetector | None = None,
    eager: bool = True,
    plans: list[FramePlan] | None = None,
    leaks: list[tuple[int, int]] | None = None,
) -> LeakFigures:
    """Run one scene through the analysis; `plans` (if given) collects each frame's plan, `leaks`
    the (frame, person) of each leaked frame."""
    photo = group_photo()
    references = [recognizer.embed(photo, group_landmarks(p)) for p in scene.people]
    counting = _Counting(recognizer)
    frames = _FrameDetector(scene, detector)
    models = AnalysisModels(frames, counting, "scripted" if detector is None else "mtcnn", counting)
    s = settings.with_overrides({"swap.target": scene.mode})
    if scene.mode == "reference":
        analyser = FaceAnalyser(models, s, references[0], eager=eager)
    else:
        analyser = FaceAnalyser(models, s, None, references, eager=eager)
    leaked = wrong = 0
    runs: dict[int, list[int]] = {}  # person -> leaked frames of each reappearance
    clear_before: dict[int, bool] = {}
    spent = 0.0
    for i, (image, truth) in enumerate(zip(scene.frames, scene.truth, strict=True)):
        frames.scripted.frame = i
        t0 = time.perf_counter()
        plan = analyser.analyse(image, i / 30.0, s)
        spent += time.perf_counter() - t0
        if plans is not None:
            plans.append(plan)
        for target in plan.targets:
            owner = _owner(target.kps, truth)
            if (
                owner is not None
                and target.weight > 0.0
                and scene.identity_of(owner.person) != target.identity
            ):
                wrong += 1
        for face in truth:
            identity = scene.identity_of(face.person)
            if identity is None:
                continue
            clear = frames.clear(i, face)
            if clear and not clear_before.get(face.person, False):
                runs.setdefault(face.person, []).append(0)
            clear_before[face.person] = clear
            if not clear:
                continue
            swapped = any(
                t.identity == identity and t.weight >= SHOWN and _owner(t.kps, truth) is face
                for t in plan.targets
            )
            covered = any(c.strength >= SHOWN and _owner(c.kps, truth) is face for c in covers_of(plan))
            shown = swapped or covered
            if not shown:
                if leaks is not None:
                    leaks.append((i, face.person))
                leaked += 1
                runs[face.person][-1] += 1
    every = [n for person in runs.values() for n in person]
    return LeakFigures(
        scene.name,
        len(every),
        max(every, default=0),
        leaked,
        wrong,
        counting.calls,
        1000.0 * spent / max(len(scene.frames), 1),
        len(scene.frames),
    )


def default_recognizer() -> Recognizer:
    from models.wrappers.dlib_recognizer import DlibRecognizer

    return DlibRecognizer()


def run_leak_bench(
    names: Sequence[str] | None = None,
    *,
    settings: Settings | None = None,
    recognizer_factory: Callable[[], Recognizer] = default_recognizer,
    detector: FaceDetector | None = None,
) -> list[tuple[LeakFigures, LeakFigures]]:
    """(as shipped, without the look on a clearer view) per scene."""
    s = settings or load_preset(DEFAULT_PRESET)
    s = s.with_overrides({"swap.recognizer": "dlib"})
    recognizer = recognizer_factory()
    out = []
    for scene in build_scenes(names):
        now = measure_scene(scene, recognizer, s, detector=detector)
        before = measure_scene(scene, recognizer, s, detector=detector, eager=False)
        out.append((now, before))
    return out


def format_leaks(results: Sequence[tuple[LeakFigures, LeakFigures]], header: str) -> str:
    lines = [
        header,
        f"{'scene':<22} {'back':>4} {'worst leak':>10} {'leaked':>6} {'wrong':>5} {'looks':>5} "
        f"{'ms/frame':>8}   | before: {'worst':>5} {'leaked':>6} {'wrong':>5} {'looks':>5} {'ms/frame':>8}",
    ]
    for now, before in results:
        lines.append(
            f"{now.scene:<22} {now.reappearances:>4} {now.worst_leak:>10} {now.leaked:>6} "
            f"{now.wrong_person:>5} {now.looks:>5} {now.ms_per_frame:>8.1f}   |         "
            f"{before.worst_leak:>5} {before.leaked:>6} "
            f"{before.wrong_person:>5} {before.looks:>5} {before.ms_per_frame:>8.1f}"
        )
    return "\n".join(lines)


def run_leak_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    from models.wrappers.dlib_recognizer import dlib_available

    if not dlib_available():
        print(
            "bench --leaks needs dlib: pip install dlib-bin==20.0.1.post1 face-recognition-models==0.3.0",
            file=out,
        )
        return 2
    from realtime.core.settings import parse_override

    settings = load_preset(getattr(args, "preset", None) or DEFAULT_PRESET)
    settings = settings.with_overrides(dict(parse_override(o) for o in getattr(args, "overrides", [])))
    detector: FaceDetector | None = None
    if getattr(args, "leaks_detector", "mtcnn") == "mtcnn":
        from models.wrappers.mtcnn import MTCNN

        detector = MTCNN(min_face_size=40)
    results = run_leak_bench(settings=settings, detector=detector)
    if getattr(args, "json", False):
        print(json.dumps([{"now": asdict(a), "before": asdict(b)} for a, b in results], indent=2), file=out)
        return 0
    which = "MTCNN" if detector is not None else "a scripted detector (the faces at least 60 % in view)"
    preset = getattr(args, "preset", None) or DEFAULT_PRESET
    header = (
        f"Leaks per scene: dlib recogniser, {which}, preset {preset}. "
        "back = reappearances; worst leak = unswapped frames in clear view of the worst one."
    )
    print(format_leaks(results, header), file=out)
    return 0


__all__ = [
    "SCENE_NAMES",
    "LeakFigures",
    "format_leaks",
    "measure_scene",
    "run_leak_bench",
    "run_leak_bench_cli",
]
