"""Client -> server -> client over WebRTC on 127.0.0.1, with the model doubles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from models.fakes.detector_double import DEFAULT_FACE, face_in_frame
from realtime.remote.client import RemoteClient
from realtime.remote.options import RemoteOptions
from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image

pytestmark = pytest.mark.timeout(120)


def options(server: ServerThread, photo: Path, tmp_path: Path, **kw: object) -> RemoteOptions:
    base: dict[str, object] = dict(
        url=server.url, token=TOKEN, photos=(photo,), consent=True, known_hosts=tmp_path / "known_hosts"
    )
    base.update(kw)
    return RemoteOptions(**base)  # type: ignore[arg-type]


def face_region(width: int, height: int) -> tuple[slice, slice]:
    box, _ = face_in_frame(DEFAULT_FACE, width, height)
    x1, y1, x2, y2 = (int(v) for v in box)
    cx, cy, w, h = (x1 + x2) // 2, (y1 + y2) // 2, (x2 - x1), (y2 - y1)
    return slice(cy - h // 5, cy + h // 5), slice(cx - w // 5, cx + w // 5)


def test_frames_come_back_swapped_over_tls(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(tls=True)
    image = frame_image()
    sink = CollectingSink()
    notes: list[str] = []
    client = RemoteClient(
        options(server, photo, tmp_path, duration_s=6.0), StillSource(image, fps=10), sink, notes.append
    )
    stats = client.run()
    assert stats.connects == 1, notes
    assert stats.remote_frames >= 10, (stats, notes)
    assert any("pinned" in n for n in notes)  # first use: the fingerprint was stored
    rows, cols = face_region(320, 240)
    out = np.median(np.stack([f.image for f in sink.frames[-20:]]), axis=0)
    face_change = np.abs(out[rows, cols] - image[rows, cols]).mean()
    background = np.abs(out[200:, :40] - image[200:, :40]).mean()
    assert face_change > 8.0, (face_change, background)  # the doubles' swap recolours the face
    assert background < 6.0  # the rest comes back as it went (codec noise only)
    assert stats.latency_ms.count > 5 and 0 < stats.latency_ms.p50 < 2000
    # Every frame back (bar the first, sent twice to start the timeline) is matched to its own.
    assert stats.remote_matched >= stats.remote_frames + stats.remote_skipped - 1, stats
    assert not server.server.sessions or all(s.closed for s in server.server.sessions.values())
