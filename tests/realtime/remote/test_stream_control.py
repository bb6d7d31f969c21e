"""A running stream's life: settings changed live (PATCH), the session length limit ending it with a
clear message, a client killed with SIGKILL freeing its place, and the bench in miniature."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import requests

from realtime.api import ExitCode
from realtime.remote.bench import run_remote_bench
from realtime.remote.client import RemoteClient
from realtime.remote.errors import StreamEndedError
from realtime.remote.runner import ServerThread
from realtime.remote.session import StreamSession
from tests.paths import REPO_ROOT
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image
from tests.realtime.remote.test_end_to_end import face_region, options
from tests.realtime.remote.test_faults import ClientThread, wait_for

pytestmark = pytest.mark.timeout(150)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def only_session(server: ServerThread) -> StreamSession:
    wait_for(lambda: len(server.server.sessions) == 1, 30, "one stream")
    return next(iter(server.server.sessions.values()))


def face_change(sink: CollectingSink, image: np.ndarray, last: int = 10) -> float:
    with sink.lock:
        frames = [f.image for f in sink.frames[-last:]]
    out = np.median(np.stack(frames), axis=0)
    rows, cols = face_region(image.shape[1], image.shape[0])
    return float(np.abs(out[rows, cols] - image[rows, cols]).mean())


def swapping_call(
    server: ServerThread, photo: Path, tmp_path: Path
) -> tuple[ClientThread, CollectingSink, np.ndarray, StreamSession]:
    """A client streaming a still face for up to a minute, its swapped frames coming back."""
    image = frame_image()
    sink = CollectingSink()
    client = ClientThread(
        RemoteClient(options(server, photo, tmp_path, duration_s=60), StillSource(image, 10), sink, print)
    )
    try:
        session = only_session(server)
        wait_for(lambda: client.client.stats.remote_frames > 15, 40, "swapped frames")
        assert face_change(sink, image) > 8.0  # swapped
    except BaseException:
        client.stop()
        raise
    return client, sink, image, session


def test_patch_changes_a_running_streams_settings_live(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    client, sink, image, session = swapping_call(server, photo, tmp_path)
    try:
        url = f"{server.url}/v1/streams/{session.stream_id}"
        refused = requests.patch(url, json={"set": ["pipeline.provider=cuda"]}, headers=AUTH, timeout=10)
        assert refused.status_code == 422 and "server's to choose" in refused.json()["error"]
        unknown = requests.patch(url, json={"preset": "../etc"}, headers=AUTH, timeout=10)
        assert unknown.status_code == 422 and "Unknown preset" in unknown.json()["error"]
        r = requests.patch(url, json={"set": ["composite.opacity=0"]}, headers=AUTH, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["settings"]["composite"]["opacity"] == 0.0
        assert r.json()["settings"]["composite"]["disclosure_label"] is True  # the server keeps its label
        assert session.engine is not None and session.engine.settings.composite.opacity == 0.0
        seen = client.client.stats.remote_frames
        wait_for(lambda: client.client.stats.remote_frames > seen + 15, 30, "frames after the change")
        assert face_change(sink, image) < 6.0  # opacity 0: the face comes back as it went
        state = requests.get(url, headers=AUTH, timeout=10).json()
        assert state == {"id": session.stream_id, "state": "running"}
    finally:
        client.stop()
    assert client.error is None, client.error


def test_the_session_limit_ends_the_stream_with_a_clear_message(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(max_session_s=3.0)
    notes: list[str] = []
    client = RemoteClient(
        options(server, photo, tmp_path, duration_s=40), StillSource(frame_image(), 10), CollectingSink(),
        notes.append,
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(StreamEndedError) as caught:
        client.run()
    message = caught.value.user_message()
    assert "time limit (3 s)" in message and "\n" not in message, message
    assert caught.value.exit_code == ExitCode.ENDED
    assert client.stats.connects == 1 and client.stats.remote_frames > 5  # it ran, then it ended
    assert time.monotonic() - started < 15  # no reconnecting round the limit
    audit = [json.loads(x) for x in (server.config.data_dir / "audit.jsonl").read_text().splitlines()]
    assert any("time limit" in str(r.get("detail", "")) for r in audit), audit


def test_a_client_killed_mid_stream_frees_its_place(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(max_streams=1, idle_s=2.0)
    still = tmp_path / "still.png"
    cv2.imwrite(str(still), frame_image())
    cmd = [
        sys.executable, "main.py", "run", "--remote", server.url, "--token", TOKEN, "--consent",
        "--source", str(photo), "--input", str(still), "--loop", "--fps", "10", "--output", "null",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    try:
        session = only_session(server)
        wait_for(lambda: session.engine is not None and session.engine.stats().frames_out > 10, 40, "frames")
        proc.send_signal(signal.SIGKILL)  # no hang-up reaches the server
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    wait_for(lambda: not server.server.sessions, 15, "the killed client's stream to be freed")
    assert "no video" in session.close_reason
    client = ClientThread(
        RemoteClient(options(server, photo, tmp_path, duration_s=30), StillSource(frame_image(), 10),
                     CollectingSink(), print)
    )  # fmt: skip
    try:
        wait_for(lambda: client.client.stats.remote_frames > 5, 40, "a new client's frames")
    finally:
        client.stop()
    assert client.error is None, client.error  # not "the server is full"


def test_the_bench_runs_in_miniature() -> None:
    result = run_remote_bench(
        seconds=3.0, max_streams=1, sizes=((320, 240),), sustained_s=3.0, batching_streams=(2,)
    )
    held = result.sustained_720p
    assert held is not None and held.seconds == 3.0
    assert held.frames_sent > 0 and 0 < held.frames_back <= held.frames_sent
    assert held.dropped + held.unreturned_at_edges == held.frames_sent - held.frames_back
    assert 0 <= held.dropped_by_client <= held.frames_sent - held.frames_back
    assert held.unreturned_at_edges < 30 and 0 <= held.dropped_settled <= held.dropped
    assert set(held.dropped_at_server) == {"arrival", "engine", "sending"}  # read while the call ran
    assert json.loads(result.to_json())["sustained_720p"]["frames_back"] == held.frames_back
    (size,) = result.sizes
    assert size.size == "320x240"
    assert 0 < size.frames_back <= size.frames_back_linked <= 1  # the figures, not the speed
    assert size.remote_ms["p50"] > 0 and size.local_ms["p50"] > 0
    assert "p50" in json.loads(result.to_json())["added_latency_ms"]
    # The picture is measured as served (marked) and from a server without the mark.
    plain = json.loads(result.to_json())["unmarked"]["320x240"]
    assert plain["psnr_db"] > 20 and size.psnr_db > 20 and 0 < plain["ssim"] <= 1
    # Memory is reported: the server (models, buffers) and this process, in MB.
    assert 50 < result.server_rss_mb_by_streams["1"] <= result.server_peak_rss_mb < 4000
    assert result.client_peak_rss_mb > 50
    # The shared swapper: two streams' faces, counted by the server with and without batching.
    (batching,) = result.batching
    assert batching["streams"] == 2 and batching["unbatched_faces_per_call"] == 1.0
    assert 1.0 <= batching["batched_faces_per_call"] <= 2.0
    assert json.loads(result.to_json())["faces_per_call"] == {"2": batching["batched_faces_per_call"]}
