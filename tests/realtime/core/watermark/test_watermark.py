"""The invisible mark: what it says, that it is invisible, and that it is found again (and only then)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from realtime.core.watermark.detect import MarkDetector
from realtime.core.watermark.embed import Watermarker
from realtime.core.watermark.payload import Payload
from tests.realtime.core.watermark.marked_clips import RUN_ID, marked, real_clip, through_codec


def detect(frames: list[np.ndarray], wide: bool = False):  # type: ignore[no-untyped-def]
    detector = MarkDetector()
    for image in frames:
        detector.add(image)
    return detector.decide(wide=wide)


def test_the_payload_round_trips_and_a_flipped_bit_fails_its_check() -> None:
    payload = Payload.for_run("2.3.1", RUN_ID)
    bits = payload.to_bits()
    assert Payload.from_bits(bits) == payload and payload.version == "2.3" and payload.ai_modified
    for at in (0, 20, 47, 60):
        broken = bits.copy()
        broken[at] ^= 1
        assert Payload.from_bits(broken) is None


def test_the_mark_costs_the_picture_less_than_42_db_and_leaves_its_colour() -> None:
    frame = real_clip(1)[0]
    out = marked([frame])[0]
    diff = out.astype(np.int16) - frame
    psnr = 10 * np.log10(255**2 / np.mean(diff.astype(np.float64) ** 2))
    assert psnr >= 42.0
    assert np.abs(diff).max() <= 2
    # The same offset on B, G and R wherever nothing clipped: the luma changes, not the colour.
    inside = (frame > 2).all(axis=2) & (frame < 253).all(axis=2)
    assert (diff[..., 0][inside] == diff[..., 1][inside]).all() and (
        diff[..., 1][inside] == diff[..., 2][inside]
    ).all()


def test_one_marked_picture_is_found_with_its_payload_and_the_unmarked_one_is_not() -> None:
    frame = real_clip(1)[0]
    found = detect(marked([frame]))
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID
    assert found.false_alarm < 1e-6
    plain = detect([frame], wide=True)
    assert not plain.marked and plain.payload is None


def test_a_marked_720p_clip_survives_h264_at_crf_32() -> None:
    # (At 360p a cell is 4 px, which CRF 32 mostly removes: docs/PROVENANCE.md has the figures.)
    frames = through_codec(marked(real_clip(20, (1280, 720))), "libx264", crf=32)
    found = detect(frames)
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID


def test_a_marked_clip_survives_vp8_at_500_kbits() -> None:
    frames = through_codec(
        marked(real_clip(30)), "libvpx", bit_rate=500_000, deadline="realtime", **{"cpu-used": 8}
    )
    found = detect(frames)
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda f: cv2.resize(f, (f.shape[1] // 2, f.shape[0] // 2), interpolation=cv2.INTER_AREA),
            id="half size",
        ),
        pytest.param(lambda f: np.ascontiguousarray(f[18:-18, 32:-32]), id="10% cropped"),
        pytest.param(lambda f: cv2.convertScaleAbs(f, alpha=1.2), id="brighter by 20%"),
        pytest.param(lambda f: cv2.convertScaleAbs(f, alpha=0.8), id="darker by 20%"),
    ],
)
def test_a_marked_clip_survives_scaling_cropping_and_brightness(edit) -> None:  # type: ignore[no-untyped-def]
    found = detect([edit(f) for f in marked(real_clip(10))])
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID


def test_a_marked_video_shown_small_inside_a_larger_picture_is_found_by_the_wide_search() -> None:
    """A screen recording: the video is a window somewhere on a bigger screen."""
    screen = []
    for f in marked(real_clip(10)):
        canvas = np.full((720, 1280, 3), 200, np.uint8)
        canvas[200:560, 300:940] = f
        screen.append(canvas)
    found = detect(screen, wide=True)
    assert found.marked and found.scale < 0.6


def test_noise_and_another_key_are_not_taken_for_the_mark() -> None:
    rng = np.random.default_rng(7)
    noise = [rng.integers(0, 256, (360, 640, 3), dtype=np.uint8) for _ in range(5)]
    assert not detect(noise, wide=True).marked
    other = Watermarker(Payload.for_run("0.1", RUN_ID), key="someone else's key")
    frame = real_clip(1)[0].copy()
    other.mark(frame)
    assert not detect([frame]).marked
