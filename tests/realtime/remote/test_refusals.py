"""A call the server refuses loses nothing: an output file that was there stays as it was, and the
refusal says what to change in words the client knows (no path of the server's)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import requests

import main
from realtime.api import ExitCode
from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN, frame_image

pytestmark = pytest.mark.timeout(120)


def run_remote(server: ServerThread, photo: Path, still: Path, out: Path) -> int:
    args = ["run", "--remote", server.url, "--token", TOKEN, "--consent", "--source", str(photo)]
    args += ["--input", str(still), "--loop", "--fps", "10", "--output", str(out), "--overwrite"]
    return main.main(args, out=io.StringIO())


@pytest.fixture
def still(tmp_path: Path) -> Path:
    path = tmp_path / "still.png"
    cv2.imwrite(str(path), frame_image())
    return path


@pytest.mark.parametrize("refusal", ["photo too large", "no face"])
def test_a_refused_call_leaves_the_existing_output_as_it_was(  # type: ignore[no-untyped-def]
    capsys, tmp_path: Path, photo: Path, still: Path, start_server: Callable[..., ServerThread], refusal: str
) -> None:
    """It turned the file into a 1-2 frame stub of the local picture, 5 times out of 5."""
    if refusal == "photo too large":
        server = start_server(max_upload_bytes=2000)
    else:
        server = start_server()
        photo = tmp_path / "wall.png"
        cv2.imwrite(str(photo), np.full((240, 320, 3), 128, np.uint8))
    out = tmp_path / "take.mp4"
    out.write_bytes(b"last week's recording")
    code = run_remote(server, photo, still, out)
    text = capsys.readouterr()
    assert code == ExitCode.REFUSED, text
    assert out.read_bytes() == b"last week's recording"
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_a_no_face_refusal_names_the_photo_not_the_servers_file(
    tmp_path: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server()
    wall = tmp_path / "wall.png"
    cv2.imwrite(str(wall), np.full((240, 320, 3), 128, np.uint8))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    face = requests.post(
        f"{server.url}/v1/faces", data=wall.read_bytes(), params={"consent": "yes"}, headers=auth, timeout=10
    ).json()["id"]
    offer = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"
    answer = requests.post(
        f"{server.url}/v1/streams",
        data=offer,
        params={"face": face, "consent": "yes"},
        headers={**auth, "Content-Type": "application/sdp"},
        timeout=30,
    )
    assert answer.status_code == 422
    text = answer.text
    assert "No face found" in text and "#1" in text
    assert str(server.config.data_dir) not in text and ".png" not in text, text


def test_an_offer_that_is_not_utf8_is_a_400_not_a_server_error(
    tmp_path: Path, photo: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    face = requests.post(
        f"{server.url}/v1/faces", data=photo.read_bytes(), params={"consent": "yes"}, headers=auth, timeout=10
    ).json()["id"]
    answer = requests.post(
        f"{server.url}/v1/streams",
        data=b"v=0\r\nm=video \xff\xfe\xfa\r\n",
        params={"face": face, "consent": "yes"},
        headers={**auth, "Content-Type": "application/sdp"},
        timeout=30,
    )
    assert answer.status_code == 400 and "UTF-8" in answer.text
