"""The server's content policy against the classifier's double on a real loopback server: `refuse`
turns a flagged source photo away and ends a stream whose picture turns flagged, each reaching the
client (`run --remote`) as its message and its own exit code; `log` only writes the verdicts down;
the audit log names each stream's watermark run id, the one the client's recording names too."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import requests

import main
from models.fakes.content_double import FLAGGED_BGR
from realtime.api import ContentVerdict, ExitCode, read_provenance
from realtime.remote.content_policy import TO_REFUSE, WINDOW, ContentPolicy, RecentVerdicts, StreamContent
from realtime.remote.runner import ServerThread
from tests.real_faces import astronaut_bgr
from tests.realtime.remote.conftest import TOKEN, frame_image

pytestmark = pytest.mark.timeout(150)


def flagged(picture: np.ndarray) -> np.ndarray:
    """`picture` with a violet panel over its right third: the double flags it."""
    out = picture.copy()
    h, w = out.shape[:2]
    out[h // 6 : h - h // 6, 2 * w // 3 : w - 8] = FLAGGED_BGR
    return out


def write(path: Path, picture: np.ndarray) -> Path:
    cv2.imwrite(str(path), picture)
    return path


def run_remote(server: ServerThread, photo: Path, still: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["run", "--remote", server.url, "--token", TOKEN, "--consent", "--source", str(photo)]
    args += ["--input", str(still), "--loop", "--fps", "10", "--output", str(out), *extra]
    text = io.StringIO()
    code = main.main(args, out=text)
    return code, text.getvalue()


def audit(server: ServerThread) -> list[dict[str, object]]:
    return server.server.audit.records()


@pytest.fixture(autouse=True)
def _signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))


def test_a_stream_is_refused_once_two_of_its_last_five_samples_are_flagged() -> None:
    recent = RecentVerdicts()
    assert (WINDOW, TO_REFUSE) == (5, 2)
    assert [recent.add(f) for f in (True, False, False, False, False, False)] == [False] * 6
    assert not recent.add(True)  # the first flagged one has left the window
    assert recent.add(True)


def test_a_stream_is_sampled_once_a_second_with_one_check_in_flight() -> None:
    content = StreamContent(lambda _p: ContentVerdict(1.0, True), refuse=False)
    assert content.due(100.0) and not content.due(100.1)  # in flight
    assert not content.record(ContentVerdict(1.0, True))
    assert not content.due(100.5) and content.due(101.0)
    content.record(ContentVerdict(2.0, True))
    assert content.flagged == 2 and "2 frame(s) checked, 2 flagged, highest score 2.00" in content.summary()
    # `log` never refuses; off makes no sampling at all.
    assert ContentPolicy("off").for_stream() is None


def test_refuse_turns_a_flagged_photo_away_with_its_own_exit_code_and_keeps_nothing(
    tmp_path: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server(content_policy="refuse")
    photo = write(tmp_path / "me.png", flagged(astronaut_bgr()))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    answer = requests.post(
        f"{server.url}/v1/faces", data=photo.read_bytes(), params={"consent": "yes"}, headers=auth, timeout=30
    )
    assert answer.status_code == 422
    assert answer.json()["refused_by"] == "content" and "content policy" in answer.json()["error"]
    assert len(server.server.faces) == 0

    out = tmp_path / "take.mp4"
    code, text = run_remote(server, photo, write(tmp_path / "still.png", frame_image()), out)
    assert code == ExitCode.CONTENT_REFUSED == 23, text
    assert "content policy refused this photo" in text
    assert not out.exists()
    refused = [r for r in audit(server) if r["event"] == "refused"]
    assert len(refused) == 2 and all("flagged" in str(r["content"]) for r in refused)


def test_refuse_ends_a_stream_whose_picture_turns_flagged_and_the_client_says_why(
    tmp_path: Path, photo: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server(content_policy="refuse")
    still = write(tmp_path / "still.png", flagged(frame_image()))
    code, text = run_remote(server, photo, still, tmp_path / "take.mp4", "--duration", "20")
    assert code == ExitCode.CONTENT_REFUSED, text
    assert "the content policy refused the stream's picture" in text and "not safe for work" in text
    records = audit(server)
    (stream,) = [r for r in records if r["event"] == "stream"]
    assert "content policy" in str(stream["detail"])
    assert str(stream["content"]).startswith(f"{TO_REFUSE} frame(s) checked, {TO_REFUSE} flagged")
    assert len([r for r in records if r["event"] == "content"]) == TO_REFUSE
    # The upload was safe and kept: its verdict is in its record.
    (upload,) = [r for r in records if r["event"] == "upload"]
    assert "not flagged" in str(upload["content"])


def test_log_writes_the_verdicts_and_the_run_id_down_and_lets_the_stream_run(
    tmp_path: Path, photo: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server(content_policy="log")
    still = write(tmp_path / "still.png", flagged(frame_image()))
    take = tmp_path / "take.mp4"
    code, text = run_remote(server, photo, still, take, "--duration", "5")
    assert code == ExitCode.OK, text
    records = audit(server)
    flagged_records = [r for r in records if r["event"] == "content"]
    assert len(flagged_records) >= TO_REFUSE + 1  # more than refuse would have allowed
    (stream,) = [r for r in records if r["event"] == "stream"]
    run_id = str(stream["run_id"])
    assert len(run_id) == 8 and all(r["run_id"] == run_id for r in flagged_records)
    # The recording made through the call names the run its frames' watermark carries.
    manifest = read_provenance(take)
    assert manifest is not None and run_id in json.dumps(manifest)


def test_off_loads_no_classifier_and_writes_no_verdict(
    tmp_path: Path, photo: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server()
    assert not server.server.content.on
    still = write(tmp_path / "still.png", flagged(frame_image()))
    code, text = run_remote(server, photo, still, tmp_path / "take.mp4", "--duration", "2")
    assert code == ExitCode.OK, text
    records = audit(server)
    assert all(r["content"] == "" for r in records) and not [r for r in records if r["event"] == "content"]
    (stream,) = [r for r in records if r["event"] == "stream"]
    assert len(str(stream["run_id"])) == 8
