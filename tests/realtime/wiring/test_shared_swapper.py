"""Every engine of a process runs its swapper through one shared service: one model session for
all their workers, their faces batched into common calls, each frame swapped exactly as a run of
its own would swap it."""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from models.fakes.doubles import write_all
from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import InferenceHub
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings
from realtime.wiring.face_swap import ModelOptions, prepare_face_swap
from tests.real_faces import astronaut_bgr, group_photo_bgr, group_photo_faces


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(tmp_path_factory.mktemp("shared"))
    write_all(folder)
    return folder


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr())
    return path


def settings(model: str) -> Settings:
    return Settings().with_overrides(
        {"detector.model": "mtcnn", "swap.model": model, "pipeline.provider": "cpu"}
    )


PLAN = FramePlan([SwapTarget(f.kps, 1.0, k + 1, 0) for k, f in enumerate(group_photo_faces()[1:4])])


@pytest.mark.parametrize("model", ["inswapper_128", "hyperswap_1a_256", "ghost_1_256"])
def test_two_engines_share_one_session_and_their_faces_meet_in_common_calls(
    models: Path, photo: Path, model: str
) -> None:
    hub = InferenceHub(BatchPolicy(max_batch=8, max_delay_us=2_000_000, active_s=60.0))
    options = ModelOptions(models_dir=models, allow_unverified=True, inference=hub)
    s = settings(model)
    engines = [prepare_face_swap([photo], s, options)(s) for _ in range(2)]
    sessions = {id(w._swapper.session) for e in engines for w in e.workers}  # type: ignore[attr-defined]
    assert len(sessions) == 1 and len(hub) == 1  # one model session for every worker of both engines
    (shared,) = hub.services()

    # Alone first: each engine heard from once (and the picture a run of its own gives).
    alone = group_photo_bgr()
    engines[0].workers[0].apply(alone, PLAN, s)
    engines[1].workers[0].apply(group_photo_bgr(), PLAN, s)
    shared.service.reset_stats()

    outputs: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(2)

    def run(k: int) -> None:
        frame = group_photo_bgr()
        barrier.wait()
        engines[k].workers[0].apply(frame, PLAN, s)
        outputs[k] = frame

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stats = shared.service.stats()
    assert stats.requests == 6 and stats.calls == 1, stats  # 3 faces x 2 engines, one model call
    assert len(stats.per_stream) == 2
    for frame in outputs.values():
        assert np.array_equal(frame, alone)  # batched, yet exactly the picture of a lone run


def test_a_lone_run_has_a_service_of_its_own_shared_by_its_workers(models: Path, photo: Path) -> None:
    s = settings("inswapper_128").with_overrides({"pipeline.frames_in_flight": 2})
    stages = prepare_face_swap([photo], s, ModelOptions(models_dir=models, allow_unverified=True))(s)
    first, second = stages.workers
    assert first._swapper.session is second._swapper.session  # type: ignore[attr-defined]
    assert first._swapper.client is second._swapper.client  # type: ignore[attr-defined]
