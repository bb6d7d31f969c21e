"""The command-line entry points, and a server killed mid-call: the client shows it and resumes."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from realtime.remote.cli import add_remote_arguments, add_serve_arguments, run_remote
from realtime.remote.client import RemoteClient
from realtime.remote.runner import free_port
from tests.paths import REPO_ROOT
from tests.realtime.remote.conftest import TOKEN, CollectingSink, StillSource, frame_image
from tests.realtime.remote.test_faults import ClientThread, wait_for

pytestmark = pytest.mark.timeout(180)


def run_parser() -> argparse.ArgumentParser:
    """The run command's arguments that `run --remote` reads, as main.py declares them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", nargs="+", type=Path)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--preset", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--loop", action="store_true")
    parser.add_argument("--label", action="store_true")
    for flag in ("--width", "--height"):
        parser.add_argument(flag, type=int, default=None)
    parser.add_argument("--fps", type=float, default=None)
    add_remote_arguments(parser)
    return parser


def start_serve_process(
    port: int, data: Path, tokens: Path, doubles: Path, *extra: str, said: list[str] | None = None
) -> subprocess.Popen[str]:
    """A `serve` process on 127.0.0.1:port, once it says it serves; `said` gets what it printed
    until then."""
    cmd = [
        sys.executable, "-m", "realtime.remote", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data), "--token-file", str(tokens), "--models-dir", str(doubles),
        "--allow-unverified", "--provider", "cpu", "--idle-timeout", "5", *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert proc.stdout is not None
    end = time.monotonic() + 60
    lines = said if said is not None else []
    while time.monotonic() < end:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith("serving on"):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keeps the pipe drained
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("the server did not start: " + "".join(lines))


def test_serve_arguments_parse_with_their_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--max-streams", "3", "--no-tls"])
    assert args.max_streams == 3 and args.no_tls and args.port == 8443 and args.idle_timeout == 30.0


def test_run_remote_from_the_command_line(
    tmp_path: Path, photo: Path, doubles: Path, token_file: Path
) -> None:
    port = free_port()
    server = start_serve_process(port, tmp_path / "data", token_file, doubles)
    try:
        still = tmp_path / "still.png"
        import cv2

        cv2.imwrite(str(still), frame_image())
        base = ["--source", str(photo), "--input", str(still), "--loop", "--fps", "10", "--output", "null",
                "--remote", f"https://127.0.0.1:{port}", "--known-hosts", str(tmp_path / "kh")]  # fmt: skip
        out = io.StringIO()
        assert run_remote(run_parser().parse_args([*base, "--token", "nope", "--consent"]), out) == 4
        assert "refused the token" in out.getvalue()
        token_path = tmp_path / "mine.txt"
        token_path.write_text(f"{TOKEN}\n")
        out = io.StringIO()
        args = run_parser().parse_args(
            [*base, "--token-file", str(token_path), "--consent", "--duration", "5"]
        )
        assert run_remote(args, out) == 0, out.getvalue()
        text = out.getvalue()
        assert "pinned" not in text  # the first call above pinned the certificate already
        assert "done:" in text and "swapped by the server" in text
        import re

        match = re.search(r"\((\d+) swapped by the server", text)
        swapped = int(match.group(1)) if match else 0
        assert swapped > 5, text
        out = io.StringIO()
        assert run_remote(run_parser().parse_args([*base, "--token", TOKEN, "--pin-fingerprint", "AA" * 32,
                                                    "--consent"]), out) == 6  # fmt: skip
        assert "intercepting" in out.getvalue()
    finally:
        server.terminate()
        server.wait(20)


def test_a_killed_server_shows_reconnecting_then_resumes_on_a_new_one(
    tmp_path: Path, photo: Path, doubles: Path, token_file: Path
) -> None:
    port = free_port()
    data = tmp_path / "data"
    server = start_serve_process(port, data, token_file, doubles)
    from tests.realtime.remote.test_end_to_end import options

    class Url:
        url = f"https://127.0.0.1:{port}"

    sink = CollectingSink()
    opts = options(Url(), photo, tmp_path, duration_s=60, stale_s=1.0, max_backoff_s=1.0)  # type: ignore[arg-type]
    client = ClientThread(RemoteClient(opts, StillSource(frame_image(), 10), sink, print))
    try:
        stats = client.client.stats
        wait_for(lambda: stats.remote_frames > 5, 40, "swapped frames")
        server.kill()
        server.wait(10)
        wait_for(lambda: "reconnecting" in stats.states and stats.reconnecting_frames > 5, 20, "reconnecting")
        with sink.lock:
            shown = sink.frames[-1].image
        assert shown[:10].mean() < frame_image()[:10].mean() - 20  # the dark "reconnecting" band
        before = stats.remote_frames
        server = start_serve_process(port, data, token_file, doubles)  # same folder: same certificate
        wait_for(lambda: stats.connects >= 2 and stats.remote_frames > before + 5, 60, "the call to resume")
    finally:
        client.stop()
        server.kill()
        server.wait(10)
    assert client.error is None, client.error
    assert client.stats is not None and client.stats.states[:3] == ["connected", "reconnecting", "connected"]
