"""The frame enhancer on the server: a stream asks for it by name (`run --remote --frame-enhancer`)
and comes back at its own size, sharpened; upscaling is refused for a stream (files only)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import requests

from realtime.api import FaceCastError
from realtime.remote.cli import remote_options
from realtime.remote.client import RemoteClient
from realtime.remote.runner import ServerThread
from realtime.remote.server import Server
from realtime.remote.session import StreamSession
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image
from tests.realtime.remote.test_end_to_end import options
from tests.realtime.remote.test_faults import ClientThread, wait_for

pytestmark = pytest.mark.timeout(150)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_a_stream_may_name_a_frame_enhancer_but_not_upscale(make_config) -> None:  # type: ignore[no-untyped-def]
    server = Server(make_config())
    settings = server.settings_from(None, ["frame_enhancer.model=real_esrgan_x2"])
    assert settings.frame_enhancer.model == "real_esrgan_x2" and settings.frame_enhancer.output_scale == 1
    with pytest.raises(FaceCastError, match="files processed on this machine"):
        server.settings_from(None, ["frame_enhancer.model=real_esrgan_x2", "frame_enhancer.upscale=true"])


def test_the_clients_flag_asks_the_server_for_it(tmp_path: Path) -> None:
    args = argparse.Namespace(
        remote="https://h:1", token="t", token_file=None, source=[tmp_path / "me.png"], consent=True,
        output="vcam", preset=None, overrides=[], detector=None, swapper=None,
        frame_enhancer="real_esrgan_x4", label=False,
    )  # fmt: skip
    assert "frame_enhancer.model=real_esrgan_x4" in remote_options(args).overrides


def test_an_enhanced_stream_comes_back_at_its_own_size(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    image = frame_image()
    sink = CollectingSink()
    wanted = options(
        server, photo, tmp_path, duration_s=60, overrides=("frame_enhancer.model=real_esrgan_x2",)
    )
    client = ClientThread(RemoteClient(wanted, StillSource(image, 10), sink, print))
    try:
        wait_for(lambda: len(server.server.sessions) == 1, 30, "one stream")
        session: StreamSession = next(iter(server.server.sessions.values()))
        wait_for(lambda: client.client.stats.remote_frames > 10, 60, "enhanced frames")
        assert session.engine is not None and "real_esrgan_x2" in session.engine.stages_label
        with sink.lock:
            shapes = {f.image.shape for f in sink.frames}
        assert shapes == {image.shape}
        url = f"{server.url}/v1/streams/{session.stream_id}"
        refused = requests.patch(url, json={"set": ["frame_enhancer.upscale=true"]}, headers=AUTH, timeout=10)
        assert refused.status_code == 422 and "files processed on this machine" in refused.json()["error"]
        assert session.engine.stats().stages_ms["frame_enhance"].mean > 0
        assert np.isfinite(session.engine.stats().stages_ms["frame_enhance"].mean)
    finally:
        client.stop()
    assert client.error is None, client.error
