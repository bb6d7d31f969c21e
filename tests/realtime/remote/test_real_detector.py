"""Client -> server -> client with the real MTCNN detector on a real face (the swapper is a double)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from realtime.remote.client import RemoteClient
from realtime.remote.options import RemoteOptions
from realtime.remote.runner import ServerThread
from tests.real_faces import astronaut_face
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image

pytestmark = pytest.mark.timeout(180)

WIDTH, HEIGHT = 640, 480


def _face_box() -> tuple[slice, slice]:
    """The middle of the astronaut's face in frame_image(WIDTH, HEIGHT) pixels."""
    scale = HEIGHT / 512
    x1, y1, x2, y2 = (float(v) * scale for v in astronaut_face().box)
    x1, x2 = x1 + (WIDTH - HEIGHT) // 2, x2 + (WIDTH - HEIGHT) // 2
    cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
    return slice(int(cy - h / 5), int(cy + h / 5)), slice(int(cx - w / 5), int(cx + w / 5))


def test_mtcnn_finds_the_real_face_and_only_it_is_swapped(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    image = frame_image(WIDTH, HEIGHT)
    sink = CollectingSink()
    notes: list[str] = []
    opts = RemoteOptions(
        url=server.url,
        token=TOKEN,
        photos=(photo,),
        overrides=("detector.model=mtcnn",),  # what `run --remote --detector mtcnn` sends
        consent=True,
        known_hosts=tmp_path / "known_hosts",
        duration_s=8.0,
    )
    stats = RemoteClient(opts, StillSource(image, fps=10), sink, notes.append).run()
    assert stats.connects == 1, notes
    assert stats.remote_frames >= 10, (stats, notes)
    rows, cols = _face_box()
    out = np.median(np.stack([f.image for f in sink.frames[-15:]]), axis=0)
    face_change = np.abs(out[rows, cols] - image[rows, cols]).mean()
    # Top corners and bottom left: the bottom right carries the disclosure label.
    corners = [(slice(0, 60), slice(0, 60)), (slice(0, 60), slice(WIDTH - 60, WIDTH))]
    corners.append((slice(HEIGHT - 60, HEIGHT), slice(0, 60)))
    background = max(np.abs(out[r, c] - image[r, c]).mean() for r, c in corners)
    below_face = np.abs(out[400:, 250:390] - image[400:, 250:390]).mean()  # the suit, far from the face
    assert face_change > 8.0, (face_change, background, below_face)  # the double's tint on the face
    assert background < 6.0, background  # codec noise only
    assert below_face < 10.0, below_face  # textured: more codec noise than the flat grey
