"""Every swap family gives the same picture on the host backend (OpenCV crops, numpy codec) and on
the device backend (the crop graph with the family's normalisation fused in, IOBinding, the paste
graph reading its output range), here on the CPU provider."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from models.fakes.doubles import write_all
from models.files.catalogue import get_entry, one_swapper_per_family
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.registry import converter_entry, family_of, load_swapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings
from realtime.face.source_face import SourceIdentity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.tools.bench import astronaut_bgr
from tests.models.ops.test_device_ops import PASTE_TOL
from tests.real_faces import astronaut_face, group_photo_bgr, group_photo_faces

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))
ONE_PER_FAMILY = one_swapper_per_family()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("family_doubles"))


def load(name: str, files: dict[str, Path]) -> FaceSwapper:
    converter = converter_entry(name)
    return load_swapper(
        files[get_entry(name).files[0].name],
        FACTORY,
        family_of(name).facts.family,
        None if converter is None else files[get_entry(converter).files[0].name],
    )


def source() -> SourceIdentity:
    from models.types import SourceFace

    raw = np.random.default_rng(3).standard_normal(512).astype(np.float32) * 0.7
    normed = raw / np.linalg.norm(raw)
    face = SourceFace(normed, raw, astronaut_bgr(), astronaut_face().kps)
    return SourceIdentity(normed, (), face=face)


@pytest.mark.parametrize("name", ONE_PER_FAMILY)
def test_host_and_device_give_the_same_picture(name: str, files: dict[str, Path]) -> None:
    frame = group_photo_bgr()
    faces = group_photo_faces()
    plan = FramePlan([SwapTarget(faces[2].kps, 1.0, 1, 0), SwapTarget(faces[3].kps, 0.8, 2, 0)])
    s = Settings()
    s = replace(s, composite=replace(s.composite, opacity=0.9))
    host = frame.copy()
    FaceSwapWorker(load(name, files), source(), s).apply(host, plan, s)
    worker = FaceSwapWorker(load(name, files), source(), s, factory=FACTORY, device_graphs=True)
    device = frame.copy()
    worker.apply(device, plan, s)
    assert worker.device_path is not None and worker.device_path.ops.use_graphs
    changed = (host != frame).any(axis=2)
    assert changed.sum() > 3000, f"{name}: the faces were not swapped"
    diff = np.abs(device.astype(np.int16) - host)
    assert diff.max() <= PASTE_TOL + 1, name  # the family's rounding, then the paste's
    assert diff[changed].mean() < 0.5, name
