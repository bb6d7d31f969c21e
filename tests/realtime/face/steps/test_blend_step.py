"""composite.blend = "poisson" in the per-face chain: host and device paths, the copies the device
path's fallback makes, and a still face's edge that must not flicker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from models.fakes.pixel_doubles import build_inswapper
from models.ops.align import estimate_norm
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings, SettingsError
from realtime.face.host.compositor import paste_region
from realtime.face.source_face import SourceIdentity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.tools.edge_flicker import measure_edge_change, still_face_clip

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))


@pytest.fixture(scope="module")
def swapper_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("blend")) / "inswapper_128.onnx"
    onnx.save(build_inswapper(), str(path))
    return path


def person() -> SourceIdentity:
    v = np.random.default_rng(3).standard_normal(512).astype(np.float32)
    return SourceIdentity(v / np.linalg.norm(v), ())


def settings(blend: str) -> Settings:
    return Settings().with_overrides({"composite.blend": blend})


def swapped(path: Path, blend: str, *, device: bool) -> tuple[np.ndarray, dict[str, float], FaceSwapWorker]:
    clip, points = still_face_clip(480, 360, 1)
    frame = clip[0].copy()
    s = settings(blend)
    worker = FaceSwapWorker(
        InSwapper.from_file(path, FACTORY), person(), s, factory=FACTORY, device_graphs=device
    )
    timings = worker.apply(frame, FramePlan([SwapTarget(points[0], 1.0, 1)]), s)
    return frame, timings, worker


def test_blend_is_feather_unless_asked_and_refuses_other_values() -> None:
    assert Settings().composite.blend == "feather"
    assert settings("poisson").composite.blend == "poisson"
    with pytest.raises(SettingsError, match=r"composite\.blend"):
        settings("seamless")


def test_poisson_changes_the_face_and_reports_its_ms(swapper_file: Path) -> None:
    feather, t_feather, _ = swapped(swapper_file, "feather", device=False)
    poisson, t_poisson, _ = swapped(swapper_file, "poisson", device=False)
    assert "blend" not in t_feather and t_poisson["blend"] > 0.0
    changed = (feather != poisson).any(axis=2)
    assert changed.sum() > 2000  # the whole face took the frame's lighting, not a few pixels
    # Nothing outside the face's paste region is touched by either.
    clip, points = still_face_clip(480, 360, 1)
    r = paste_region(clip[0].shape, 128, estimate_norm(points[0], 128))
    outside = np.ones(changed.shape, dtype=bool)
    outside[r.y0 : r.y1, r.x0 : r.x1] = False
    assert np.array_equal(poisson[outside], clip[0][outside])


def test_the_device_path_blends_like_the_host_with_one_crop_round_trip(swapper_file: Path) -> None:
    host, _, _ = swapped(swapper_file, "poisson", device=False)
    device, timings, worker = swapped(swapper_file, "poisson", device=True)
    assert worker.device_path is not None and "blend" in timings
    # The crop graph's 1-level differences pass through the solve; on average the two agree.
    diff = np.abs(device.astype(np.int16) - host)
    assert diff.mean() < 0.5 and diff.max() <= 6
    copies = worker.device_path.last_copies
    # The fallback: the swap's crop comes to the host for the solve and goes back to be pasted.
    assert (copies.frame_uploads, copies.downloads, copies.crop_downloads, copies.crop_uploads) == (
        1,
        1,
        1,
        1,
    )
    _, feather_timings, feather_worker = swapped(swapper_file, "feather", device=True)
    assert feather_worker.device_path is not None
    assert feather_worker.device_path.last_copies.crop_downloads == 0
    assert timings["copies"] == feather_timings["copies"] + 2


def test_a_still_faces_edge_does_not_flicker_more_than_the_feathered_paste() -> None:
    """Camera noise and a landmark wobble on a still face, through the whole chain: the edge of the
    Poisson-blended face changes from frame to frame no more than the feathered paste's (it hides
    the edge, so the wobble shows less), and the face inside no more than half as much again."""
    feather = measure_edge_change("feather", width=480, height=360, frames=12)
    poisson = measure_edge_change("poisson", width=480, height=360, frames=12)
    assert feather.camera == poisson.camera  # the same clip
    assert poisson.edge <= feather.edge
    assert poisson.inside <= 1.5 * feather.inside
    assert poisson.edge <= poisson.camera * 1.5
