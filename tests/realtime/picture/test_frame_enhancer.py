"""realtime.picture.frame_enhancer: keep-size and upscale on the upscaling double, and the engine
around it (outputs opened at the larger size, every frame through, a failure passing frames on)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest

from models.fakes.upscaler_double import build_upscaler, upscaler_reference
from models.runtime.session import SessionConfig, SessionFactory
from models.types import ImageBGR
from models.wrappers.frame_enhancers import FrameEnhancer
from realtime.core.contracts import PassthroughAnalyser, PassthroughWorker
from realtime.core.engine import Engine
from realtime.core.events import EngineEvent
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings
from realtime.core.stage_set import StageSet
from realtime.picture.frame_enhancer import FrameEnhanceStage
from tests.engine_fakes import FakeSource, frame_with_index
from tests.real_faces import astronaut_bgr

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))


@pytest.fixture(scope="module")
def enhancer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("frame_enhancer")) / "real_esrgan_x2.onnx"
    onnx.save(build_upscaler(2), str(path))
    return path


def stage(path: Path) -> FrameEnhanceStage:
    return FrameEnhanceStage(FrameEnhancer.from_file("real_esrgan_x2", path, FACTORY))


def settings(**over: object) -> Settings:
    return Settings().with_overrides({"frame_enhancer.model": "real_esrgan_x2", **over})


def photo(h: int = 180, w: int = 250) -> ImageBGR:
    return np.ascontiguousarray(cv2.resize(astronaut_bgr(), (w, h), interpolation=cv2.INTER_AREA))


def test_keep_size_sharpens_in_place_at_the_same_size(enhancer_file: Path) -> None:
    image = photo()
    original = image.copy()
    out, timings = stage(enhancer_file).process(image, settings(**{"frame_enhancer.blend": 1.0}))
    assert out is image and out.shape == original.shape and timings["frame_enhance"] > 0
    expected = cv2.resize(upscaler_reference(original, 2), (250, 180), interpolation=cv2.INTER_AREA)
    assert np.abs(out.astype(np.int16) - expected).max() <= 1
    assert np.abs(out.astype(np.int16) - original).mean() > 1.0  # it went through the model


def test_the_blend_mixes_the_enhanced_picture_with_the_plain_one(enhancer_file: Path) -> None:
    image = photo()
    full = stage(enhancer_file).process(image.copy(), settings(**{"frame_enhancer.blend": 1.0}))[0]
    half = stage(enhancer_file).process(image.copy(), settings(**{"frame_enhancer.blend": 0.5}))[0]
    expected = (full.astype(np.float64) + image) / 2.0
    assert np.abs(half - expected).max() <= 1.0
    untouched = image.copy()
    out, timings = stage(enhancer_file).process(untouched, settings(**{"frame_enhancer.blend": 0.0}))
    assert np.array_equal(out, image) and timings == {}


def test_upscale_gives_a_new_picture_twice_as_large(enhancer_file: Path) -> None:
    image = photo()
    s = settings(**{"frame_enhancer.upscale": True, "frame_enhancer.blend": 1.0})
    enhance = stage(enhancer_file)
    first, _ = enhance.process(image, s)
    assert first.shape == (360, 500, 3)
    assert np.abs(first.astype(np.int16) - upscaler_reference(image, 2)).max() <= 1
    second, _ = enhance.process(image, s)
    assert second is not first  # each frame owns its picture while it waits for the output
    assert np.array_equal(second, first)
    blended, _ = stage(enhancer_file).process(image, settings(**{"frame_enhancer.upscale": True}))
    plain = cv2.resize(image, (500, 360), interpolation=cv2.INTER_LINEAR)
    expected = 0.8 * first.astype(np.float64) + 0.2 * plain
    assert np.abs(blended - expected).max() <= 1.0


def test_the_output_scale_follows_the_model_and_upscale() -> None:
    assert Settings().frame_enhancer.output_scale == 1
    assert settings().frame_enhancer.output_scale == 1  # keep size: the live default
    assert settings(**{"frame_enhancer.upscale": True}).frame_enhancer.output_scale == 2
    x4 = Settings().with_overrides(
        {"frame_enhancer.model": "real_esrgan_x4_fp16", "frame_enhancer.upscale": True}
    )
    assert x4.frame_enhancer.output_scale == 4


class SizeSink:
    """Records the size it was opened at and every frame's size."""

    description = "size sink"

    def __init__(self) -> None:
        self.opened: tuple[int, int] | None = None
        self.sizes: list[tuple[int, int]] = []
        self.indices: list[int] = []

    def open(self, width: int, height: int, fps: float) -> None:
        self.opened = (width, height)

    def send(self, frame: VideoFrame) -> None:
        self.sizes.append((frame.width, frame.height))
        self.indices.append(frame.index)

    def close(self) -> None: ...

    def abort(self) -> None: ...


def run_engine(stages: StageSet, s: Settings, frames: int = 6) -> tuple[SizeSink, list[EngineEvent]]:
    sink = SizeSink()
    events: list[EngineEvent] = []
    engine = Engine(
        FakeSource(frames=frames, size=(96, 64)), sink, s, lambda _s: stages, on_event=events.append
    )
    engine.start()
    assert engine.wait(60.0)
    return sink, events


def two_workers(frame_stages: tuple[object, ...]) -> StageSet:
    return StageSet(
        PassthroughAnalyser(), (PassthroughWorker(), PassthroughWorker()), frame_stages=frame_stages
    )  # type: ignore[arg-type]


def test_the_engine_opens_its_output_at_the_upscaled_size_and_sends_every_frame(enhancer_file: Path) -> None:
    s = settings(**{"frame_enhancer.upscale": True})
    sink, events = run_engine(two_workers((stage(enhancer_file), stage(enhancer_file))), s)
    assert sink.opened == (192, 128)
    assert sink.indices == list(range(6)) and sink.sizes == [(192, 128)] * 6
    assert not [e for e in events if e.kind in ("warning", "error")]
    # Keep size: the output is the input's size.
    sink, _ = run_engine(two_workers((stage(enhancer_file), stage(enhancer_file))), settings())
    assert sink.opened == (96, 64) and sink.sizes == [(96, 64)] * 6


class BrokenStage:
    def process(self, image: ImageBGR, s: Settings) -> tuple[ImageBGR, dict[str, float]]:
        raise RuntimeError("the model fell over")


def test_a_failing_frame_enhancer_passes_the_frames_on_and_says_so_once() -> None:
    sink, events = run_engine(two_workers((BrokenStage(), BrokenStage())), settings(), frames=8)
    assert sink.indices == list(range(8)) and sink.sizes == [(96, 64)] * 8
    warnings = [e.message for e in events if e.kind == "warning"]
    assert len(warnings) == 1 and "frame enhancer failed" in warnings[0] and "fell over" in warnings[0]


def test_frames_keep_their_pictures_without_a_frame_enhancer() -> None:
    sink, _ = run_engine(two_workers(()), Settings())
    assert sink.opened == (96, 64) and sink.indices == list(range(6))
    assert frame_with_index(0, (96, 64)).shape == (64, 96, 3)


def test_a_new_frame_enhancer_loads_in_the_background_a_new_blend_does_not() -> None:
    from realtime.core.reload import needs_reload

    base = settings()
    assert needs_reload(base, base.with_overrides({"frame_enhancer.model": "real_esrgan_x4"}))
    assert needs_reload(base, base.with_overrides({"frame_enhancer.model": "none"}))
    assert not needs_reload(base, base.with_overrides({"frame_enhancer.blend": 0.3}))
