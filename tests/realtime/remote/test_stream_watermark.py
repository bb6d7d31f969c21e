"""What a remote call brings back carries the server's watermark, with the run id the client chose;
the recording the client makes of the call is signed naming that same run
(`main.py verify` says so), and the server's audit log names it. Turned off by the operator, the
frames come back unmarked."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

import main
from realtime.api import ExitCode, open_output
from realtime.core.watermark.detect import MarkDetector
from realtime.remote.client import RemoteClient
from realtime.remote.options import RemoteOptions
from realtime.remote.picture import FaceScene
from realtime.remote.runner import ServerThread, free_port
from tests.realtime.remote.conftest import TOKEN, CollectingSink
from tests.realtime.remote.test_cli_reconnect import start_serve_process

pytestmark = pytest.mark.timeout(150)

RUN_ID = "cafe0042"


@pytest.fixture(autouse=True)
def _signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))


def options(server: ServerThread, photo: Path, tmp_path: Path, seconds: float) -> RemoteOptions:
    return RemoteOptions(
        url=server.url, token=TOKEN, photos=(photo,), consent=True, known_hosts=tmp_path / "known_hosts",
        duration_s=seconds, run_id=RUN_ID,
    )  # fmt: skip


def detect(sink: CollectingSink) -> object:
    detector = MarkDetector()
    with sink.lock:
        for frame in sink.frames:
            detector.add(frame.image)
    return detector.decide(wide=False)


def test_the_frames_a_call_brings_back_carry_the_servers_mark_with_the_clients_run_id(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    sink = CollectingSink(keep=60)
    stats = RemoteClient(
        options(server, photo, tmp_path, 4.0), FaceScene(640, 480, 25.0), sink, lambda _: None
    ).run()
    assert stats.remote_frames > 30, stats
    found = detect(sink)
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID  # type: ignore[attr-defined]
    (stream,) = [r for r in server.server.audit.records() if r["event"] == "stream"]
    assert stream["run_id"] == RUN_ID


def test_an_operator_who_turns_the_mark_off_gets_unmarked_frames(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    server.server.config = replace(server.server.config, watermark=False)
    sink = CollectingSink(keep=60)
    RemoteClient(options(server, photo, tmp_path, 3.0), FaceScene(640, 480, 25.0), sink, lambda _: None).run()
    assert len(sink.frames) > 20
    assert not detect(sink).marked  # type: ignore[attr-defined]


def test_serve_no_watermark_says_so_and_its_streams_come_back_unmarked(
    photo: Path, doubles: Path, token_file: Path, tmp_path: Path
) -> None:
    port, said = free_port(), []
    server = start_serve_process(port, tmp_path / "data", token_file, doubles, "--no-watermark", said=said)
    try:

        class Url:
            url = f"https://127.0.0.1:{port}"

        sink = CollectingSink(keep=60)
        RemoteClient(
            options(Url(), photo, tmp_path, 3.0),
            FaceScene(640, 480, 25.0),
            sink,
            lambda _: None,  # type: ignore[arg-type]
        ).run()
    finally:
        server.terminate()
        server.wait(20)
    assert any(line.startswith("warning: --no-watermark") for line in said), said
    assert len(sink.frames) > 20
    assert not detect(sink).marked  # type: ignore[attr-defined]


def test_a_recording_of_a_call_is_marked_and_signed_naming_the_same_run(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    take = tmp_path / "take.mp4"
    sink = open_output(str(take), run_id=RUN_ID)  # as `run --remote --output take.mp4` opens it
    RemoteClient(options(server, photo, tmp_path, 4.0), FaceScene(640, 480, 25.0), sink, lambda _: None).run()
    out = io.StringIO()
    assert main.main(["verify", str(take)], out=out) == ExitCode.OK, out.getvalue()
    text = out.getvalue()
    assert f"run {RUN_ID}" in text and "the same run as the watermark" in text, text


def test_a_server_refuses_a_run_id_that_is_not_eight_hex_digits(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    bad = replace(options(server, photo, tmp_path, 2.0), run_id="../../etc")
    client = RemoteClient(bad, FaceScene(320, 240, 25.0), CollectingSink(), lambda _: None)
    from realtime.remote.errors import RemoteError

    with pytest.raises(RemoteError, match="run must be 8 hex digits"):
        client.run()
