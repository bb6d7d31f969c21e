"""Every way a remote call goes wrong: tokens, a full server, big uploads, consent, idle, two clients."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import requests
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from av.frame import Frame

from realtime.remote.client import ClientStats, RemoteClient
from realtime.remote.errors import AuthError, ServerFullError, UnreachableError
from realtime.remote.runner import ServerThread, free_port
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image
from tests.realtime.remote.test_end_to_end import options

pytestmark = pytest.mark.timeout(120)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def upload(server: ServerThread, photo: Path, consent: str = "yes", token: str = TOKEN) -> requests.Response:
    return requests.post(
        f"{server.url}/v1/faces",
        data=photo.read_bytes(),
        params={"consent": consent},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class ClientThread:
    def __init__(self, client: RemoteClient) -> None:
        self.client = client
        self.stats: ClientStats | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.stats = self.client.run()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.client.stop_event.set()
        self.thread.join(15)


def test_wrong_token_is_refused_with_401_and_a_clear_message(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    r = upload(server, photo, token="wrong")
    assert r.status_code == 401 and "token" in r.json()["error"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert requests.get(f"{server.url}/v1/health", timeout=5).json()["status"] == "ok"  # no token needed
    client = RemoteClient(
        options(server, photo, tmp_path, token="wrong"), StillSource(frame_image()), CollectingSink(), print
    )
    with pytest.raises(AuthError) as caught:
        client.run()
    assert caught.value.exit_code == 4 and "refused the token" in caught.value.user_message()


def test_editing_the_token_file_revokes_a_token(
    start_server: Callable[..., ServerThread], photo: Path, token_file: Path
) -> None:
    server = start_server()
    assert upload(server, photo).status_code == 201
    token_file.write_text("bob:sha256:" + "0" * 64 + "\n", encoding="utf-8")
    assert upload(server, photo).status_code == 401


def test_uploads_need_consent_and_fit_the_caps(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(max_upload_bytes=20_000, max_upload_pixels=100 * 100)
    assert upload(server, photo, consent="no").status_code == 403
    big = upload(server, photo)
    assert big.status_code == 413, big.text
    small = tmp_path / "small.png"
    import cv2

    cv2.imwrite(str(small), np.full((150, 200, 3), 120, np.uint8))  # under the byte cap, over the pixels
    assert small.stat().st_size < 20_000
    r = upload(server, small)
    assert r.status_code == 413 and "pixels" in r.json()["error"]
    (tmp_path / "not.png").write_bytes(b"GIF89a" + b"\0" * 100)
    assert upload(server, tmp_path / "not.png").status_code == 415
    assert not list((tmp_path / "data" / "faces").iterdir())  # nothing refused was kept


def test_a_full_server_answers_503_with_retry_after(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(max_streams=1)
    first = ClientThread(
        RemoteClient(
            options(server, photo, tmp_path, duration_s=20),
            StillSource(frame_image(), 10),
            CollectingSink(),
            print,
        )
    )
    try:
        wait_for(lambda: len(server.server.sessions) == 1, 20, "the first stream")
        face = upload(server, photo).json()["id"]
        r = requests.post(
            f"{server.url}/v1/streams", params={"face": face, "consent": "yes"}, data="v=0",
            headers={**AUTH, "Content-Type": "application/sdp"}, timeout=10,
        )  # fmt: skip
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0
        second = RemoteClient(
            options(server, photo, tmp_path), StillSource(frame_image()), CollectingSink(), print
        )
        with pytest.raises(ServerFullError) as caught:
            second.run()
        assert caught.value.exit_code == 5
        wait_for(lambda: first.client.stats.remote_frames > 3, 20, "the first stream's frames")
    finally:
        first.stop()
    assert first.error is None and first.stats is not None and first.stats.remote_frames > 0


def test_two_clients_at_once_both_get_swapped_frames(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server(max_streams=2)
    clients = [
        ClientThread(
            RemoteClient(
                options(server, photo, tmp_path, duration_s=7),
                StillSource(frame_image(), 8),
                CollectingSink(),
                print,
            )
        )
        for _ in range(2)
    ]
    wait_for(lambda: len(server.server.sessions) == 2, 30, "both streams")
    for c in clients:
        c.thread.join(30)
    for c in clients:
        assert c.error is None and c.stats is not None
        assert c.stats.remote_frames > 10
    wait_for(lambda: not server.server.sessions, 10, "both streams to end")
    # Each model opened once for both streams (the pool keeps them for the next): the detector,
    # the recogniser, the swapper; each stream's own would be 8.
    models = requests.get(f"{server.url}/metrics", headers=AUTH, timeout=10).text
    assert "facecast_model_sessions 3\n" in models, models
    records = server.server.audit.records()
    streams = [r for r in records if r["event"] == "stream"]
    assert len(streams) == 2 and all(r["token_name"] == "alice" and r["photo_sha256"] for r in streams)
    assert all(float(str(r["duration_s"])) > 1 for r in streams)
    assert not list((tmp_path / "data" / "faces").iterdir())  # the faces went with their streams


class SilentTrack(MediaStreamTrack):
    """A video track that never delivers a frame: a client that connected and went quiet."""

    kind = "video"

    async def recv(self) -> Frame:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def test_a_stream_without_video_is_closed_after_the_idle_timeout(
    start_server: Callable[..., ServerThread], photo: Path
) -> None:
    server = start_server(idle_s=1.5)
    face = upload(server, photo).json()["id"]

    async def call() -> int:
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        pc.addTransceiver(SilentTrack(), direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        r = await asyncio.to_thread(
            requests.post, f"{server.url}/v1/streams", params={"face": face, "consent": "yes"},
            data=pc.localDescription.sdp, headers={**AUTH, "Content-Type": "application/sdp"}, timeout=20,
        )  # fmt: skip
        assert r.status_code == 201 and r.headers["Location"].startswith("/v1/streams/")
        await pc.setRemoteDescription(RTCSessionDescription(r.text, "answer"))
        await asyncio.sleep(0.5)
        running = len(server.server.sessions)
        await asyncio.sleep(3.0)
        await pc.close()
        return running

    assert asyncio.run(call()) == 1
    wait_for(lambda: not server.server.sessions, 5, "the idle stream to close")
    streams = [r for r in server.server.audit.records() if r["event"] == "stream"]
    assert streams and "no video" in str(streams[-1]["detail"])


def test_no_server_is_a_one_line_error_with_its_own_exit_code(photo: Path, tmp_path: Path) -> None:
    port = free_port()
    from realtime.remote.options import RemoteOptions

    opts = RemoteOptions(url=f"https://127.0.0.1:{port}", token=TOKEN, photos=(photo,), consent=True,
                         known_hosts=tmp_path / "kh")  # fmt: skip
    client = RemoteClient(opts, StillSource(frame_image()), CollectingSink(), print)
    started = time.monotonic()
    with pytest.raises(UnreachableError) as caught:
        client.run()
    assert time.monotonic() - started < 10
    assert caught.value.exit_code == 3 and f"127.0.0.1:{port}" in caught.value.user_message()
