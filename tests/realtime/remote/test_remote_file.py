"""`main.py run --remote URL --input clip.mp4 --output out.mp4`: every frame of the file comes back
swapped, in order, at its own timestamp, with the sound kept; a file that does not come back
whole fails with its own exit code and nothing under the output's name."""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import main
from realtime.api import ExitCode
from realtime.remote import client as client_module
from realtime.remote.file_pacing import AckedSending
from realtime.remote.runner import ServerThread
from tests.realtime.jobs.media import audio_packets, decode, video_times, write_clip
from tests.realtime.remote.conftest import TOKEN

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two seconds at 25 fps with a variable frame rate (every third frame lasts three periods)
    and an AAC sound track."""
    return write_clip(Path(tmp_path_factory.mktemp("clip")) / "clip.mp4", 30, steps=(1, 1, 3))


def remote_run(server: ServerThread, photo: Path, clip: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["run", "--remote", server.url, "--token", TOKEN, "--consent", "--source", str(photo),
            "--input", str(clip), "--output", str(out), *extra]  # fmt: skip
    text = io.StringIO()
    return main.main(args, out=text), text.getvalue()


def test_every_frame_of_a_file_comes_back_swapped_in_order_at_its_time_with_its_sound(
    tmp_path: Path, photo: Path, clip: Path, start_server: Callable[..., ServerThread]
) -> None:
    server = start_server()
    out = tmp_path / "takes" / "out.mp4"
    code, text = remote_run(server, photo, clip, out)
    assert code == 0, text
    assert "(192x144 @ " in text and "0x0" not in text, text  # the start line has the real size
    assert video_times(out) == video_times(clip)  # every frame, at its own (variable) time
    assert audio_packets(out) == audio_packets(clip)  # the sound, packet for packet
    before, after = decode(clip), decode(out)
    assert len(after) == len(before) == 30
    pairs = zip(before, after, strict=True)
    changed = [float(np.abs(a.astype(int) - b.astype(int)).mean()) for a, b in pairs]
    assert min(changed) > 1.0, changed  # every frame went through the swap (none sent back unswapped)
    for i, frame in enumerate(after):  # each in its own place: nearer its own input than a neighbour's
        own = np.abs(frame.astype(int) - before[i].astype(int)).mean()
        for j in (i - 1, i + 1):
            if 0 <= j < len(before):
                assert own < np.abs(frame.astype(int) - before[j].astype(int)).mean(), (i, j)
    assert [p.name for p in out.parent.iterdir()] == ["out.mp4"]  # no work folder, no partial file
    assert all(s.closed for s in server.server.sessions.values())


def test_an_existing_output_is_kept_unless_overwrite(
    tmp_path: Path, photo: Path, clip: Path, start_server: Callable[..., ServerThread]
) -> None:
    out = tmp_path / "out.mp4"
    out.write_bytes(b"my earlier take")
    server = start_server()
    code, text = remote_run(server, photo, clip, out)
    assert code == ExitCode.OUTPUT_EXISTS and out.read_bytes() == b"my earlier take", text
    assert not server.server.streams_total  # refused before the call


class LosesOne(AckedSending):
    """The client's pacing, told that frame 3 never comes back (as a server or link that drops
    it every time would), giving up quickly."""

    def returned(self, ordinal: int, seq: int) -> bool:
        return False if ordinal == 3 else super().returned(ordinal, seq)


def test_a_frame_that_never_comes_back_fails_with_its_own_code_and_writes_nothing(
    tmp_path: Path, photo: Path, clip: Path, start_server: Callable[..., ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(client_module, "AckedSending", partial(LosesOne, resend_after_s=0.5, max_tries=2))
    server = start_server()
    out = tmp_path / "takes" / "out.mp4"
    out.parent.mkdir()
    code, text = remote_run(server, photo, clip, out)
    assert code == ExitCode.FRAMES_MISSING == 20, text
    assert "frame 4 never came back in 2 sends" in text and "nothing was written" in text, text
    assert list(out.parent.iterdir()) == []  # no output, no partial file, no work folder
