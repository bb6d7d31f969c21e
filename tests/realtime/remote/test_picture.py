"""The returned picture: measured where the swap does not touch it, it comes back clean over a
loopback call (PSNR and SSIM above floors aiortc's own VP8 settings miss), and over a slow link
the sender follows the link down while frames keep coming."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

import realtime.remote.client as client_module
import realtime.remote.server as server_module
from realtime.api import FaceCastError, NullSink, draw_disclosure_label
from realtime.remote.client import ClientStats, RemoteClient
from realtime.remote.link_shaper import Bottleneck, ShapedLink
from realtime.remote.options import RemoteOptions
from realtime.remote.picture import (
    CLEAN_DB,
    FaceScene,
    MeteredSink,
    MeteredSource,
    PictureMeter,
    PictureScore,
    psnr_db,
    ssim,
)
from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

SIZE = (320, 240)
# Measured at 320x240 over loopback (the scene below), the mark off, side by side on a quiet machine
# (load 0.5): 35.9-36.5 dB and SSIM 0.959-0.968 with the tuned sender, 34.97 dB and 0.948 with
# aiortc's VP8 settings (its noise filter smears moving pictures); once 36.8-37.1 / 0.974 against
# 34.4 / 0.942. 4:2:0 colour alone caps this scene at 38.5 dB at this size. Between calls the
# tuned sender's mean moves by +-0.3 dB, so the test compares it with aiortc's settings in the same
# test, and holds it above what those settings ever reached.
PSNR_FLOOR_DB = 35.5
SSIM_FLOOR = 0.955
PSNR_GAIN_DB = 0.8  # over aiortc's settings, measured alongside (1.3-1.5 dB measured)
SSIM_GAIN = 0.008  # likewise (0.011-0.020 measured)


def test_the_measured_region_leaves_out_the_face_and_the_label() -> None:
    scene = FaceScene(*SIZE, realtime=False, frames=2)
    scene.open()
    frame = scene.read()
    assert frame is not None and frame.image.shape == (240, 320, 3)
    mask = scene.mask()
    x1, y1, x2, y2 = scene.face_box
    assert not mask[y1:y2, x1:x2].any()  # the head (and a margin) is the swap's
    labelled = frame.image.copy()
    draw_disclosure_label(labelled)
    assert not mask[np.any(labelled != frame.image, axis=2)].any()  # so is the label
    assert mask.mean() / 255 > 0.4  # the rest of the picture is measured
    assert psnr_db(frame.image, labelled, mask) == CLEAN_DB  # neither counts against the picture
    noise = np.random.default_rng(1).choice([-4, 4], frame.image.shape)
    noisy = np.clip(frame.image.astype(int) + noise, 0, 255)
    assert psnr_db(frame.image, noisy.astype(np.uint8), mask) == pytest.approx(36.1, abs=0.2)  # 255² / 16
    assert ssim(frame.image, frame.image, mask) == pytest.approx(1.0)
    blurred = [ssim(frame.image, cv2.GaussianBlur(frame.image, (0, 0), sigma), mask) for sigma in (1.0, 4.0)]
    assert 1.0 > blurred[0] > blurred[1]  # the more detail lost, the lower


def call(
    server: ServerThread,
    photo: Path,
    tmp_path: Path,
    seconds: float,
    link: ShapedLink | None = None,
    max_bitrate: int | None = None,
) -> tuple[ClientStats, PictureScore]:
    scene = FaceScene(*SIZE)
    meter = PictureMeter(scene.mask())
    options = RemoteOptions(
        url=server.url, token=TOKEN, photos=(photo,), consent=True, known_hosts=tmp_path / "known_hosts",
        duration_s=seconds, max_bitrate=max_bitrate,
    )  # fmt: skip
    client = RemoteClient(
        options, MeteredSource(scene, meter), MeteredSink(NullSink(), meter), lambda _: None,
        link=None if link is None else link.apply,
    )  # fmt: skip
    return client.run(), meter.score()


def test_a_call_brings_the_picture_back_clean(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The transport's loss alone: the server's watermark (+-2 levels on 3 px cells at this size) is
    # a change it makes on purpose, like the label the meter leaves out (with it on: 35.5 dB and
    # SSIM 0.951, its own 42 dB added to the transport's loss; that, not the load, once took this
    # test under its floor).
    server = start_server()
    server.server.config = replace(server.server.config, watermark=False)
    stats, score = call(server, photo, tmp_path, 4.0)
    assert stats.connects == 1 and score.frames >= 20, (stats, score)
    assert score.psnr_db >= PSNR_FLOOR_DB, score
    assert score.ssim >= SSIM_FLOOR, score
    up, down = stats.bitrate_bps()
    assert 0 < up <= 700_000 and 0 < down <= 700_000, stats  # within 320x240's 600 kbit/s (+ overshoot)
    # The same call with aiortc's own VP8 encoder both ways, on the machine as it is now.
    for module in (server_module, client_module):
        monkeypatch.setattr(module, "tuned_senders", lambda pc, rate=None: [])
    baseline = start_server()
    baseline.server.config = replace(baseline.server.config, watermark=False)
    _, plain = call(baseline, photo, tmp_path, 4.0)
    assert plain.frames >= 20, plain
    assert score.psnr_db >= plain.psnr_db + PSNR_GAIN_DB, (score, plain)
    assert score.ssim >= plain.ssim + SSIM_GAIN, (score, plain)


def test_a_users_ceiling_holds_the_video_both_ways(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    assert server.server.rate_from("200").max_bps == 200_000
    with pytest.raises(FaceCastError, match="max_kbps"):
        server.server.rate_from("lots")
    stats, _ = call(server, photo, tmp_path, 4.0, max_bitrate=160_000)  # below the 300 kbit/s start
    up, down = stats.bitrate_bps()
    assert 0 < up < 190_000 and 0 < down < 190_000, stats  # the server's video back too (max_kbps)


def test_the_slow_links_queue_holds_what_the_rate_allows_and_drops_the_rest() -> None:
    link = Bottleneck(rate_bps=8000, queue_s=0.45)  # 1000 bytes a second
    assert link.admit(100, now=0.0) == pytest.approx(0.1)
    assert link.admit(100, now=0.0) == pytest.approx(0.2)  # waits behind the first
    assert link.admit(300, now=0.0) == pytest.approx(0.5)  # starts after 0.2 s, leaves at 0.5 s
    assert link.admit(100, now=0.0) is None and link.dropped == 1  # would wait 0.5 s: lost
    assert link.admit(100, now=2.0) == pytest.approx(2.1)  # the link was idle meanwhile
    assert link.passed == 4 and link.bytes_passed == 600


def test_over_a_slow_link_the_sender_follows_it_down_and_frames_keep_coming(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    """320x240 starts at 300 kbit/s and may rise to 600: over a 450 kbit/s link it rises, fills
    the link, and comes back down, each way, without a freeze long enough to drop the call (as
    1280x720 over 2 Mbit/s in `bench --remote`)."""
    link = ShapedLink(rate_bps=450_000)
    stats, score = call(start_server(), photo, tmp_path, 10.0, link)
    assert stats.connects == 1, stats  # no freeze long enough to drop the link
    assert stats.rate_changes >= 2 and stats.send_rate_bps < 450_000, stats  # up, then down to fit
    assert link.up.passed > 0 and link.down.passed > 0
    assert score.frames >= 60 and score.psnr_db > 30.0, score  # still a picture, and measured
