"""`main.py run --input VIDEO --output VIDEO` as a file job, end to end on the model doubles:
everything the input held is in the output, nothing existing is destroyed, a cut or damaged run
says so with its own exit code, and the same command resumes where a kill left it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

import main
from realtime.api import ExitCode
from realtime.jobs.manifest import finished_chunk_files, job_folder
from realtime.tools.bench import astronaut_bgr
from tests.paths import REPO_ROOT
from tests.realtime.jobs.media import (
    assert_same_frames,
    audio_packets,
    decode,
    subtitle_packets,
    video_times,
    with_subtitles,
    write_clip,
)
from tests.signals import CHILD_SIGNALS


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr()[:, ::-1].copy())
    return path


@pytest.fixture(scope="module")
def vfr_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(tmp_path_factory.mktemp("clip"))
    return write_clip(folder / "holiday.mp4", 60, steps=(1, 1, 3), tags={"title": "Holiday"})


def job_args(models: Path, photo: Path, clip: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--models-dir", str(models), "--allow-unverified", "--source", str(photo),
            "--input", str(clip), "--output", str(out), *extra]  # fmt: skip


def run_cli(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main.main(args, out=out), out.getvalue()


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(".")]


def test_a_file_job_keeps_sound_timing_and_tags_and_swaps_the_face(
    tmp_path: Path, models: Path, photo: Path, vfr_clip: Path
) -> None:
    out = tmp_path / "out.mp4"
    code, text = run_cli(job_args(models, photo, vfr_clip, out, "--chunk-seconds", "1"))
    assert code == 0, text
    assert "audio aac (copied)" in text and "3 chunks" in text
    assert video_times(out) == video_times(vfr_clip)  # variable frame rate kept, frame for frame
    assert audio_packets(out) == audio_packets(vfr_clip)  # the sound, packet for packet, in place
    with av.open(str(out)) as c:
        assert c.metadata["title"] == "Holiday"
        assert c.streams.audio[0].metadata["language"] == "deu"
        assert "AI" in c.metadata["comment"]
    before, after = decode(vfr_clip), decode(out)
    assert len(after) == len(before)
    assert max(np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(before, after, strict=True)) > 1.0
    assert leftovers(tmp_path) == []  # no partial file, no job folder


def test_an_existing_output_is_refused_unless_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, models: Path, photo: Path, vfr_clip: Path
) -> None:
    out = tmp_path / "out.mp4"
    out.write_bytes(b"my earlier take")
    code, _ = run_cli(job_args(models, photo, vfr_clip, out))
    err = capsys.readouterr().err
    assert code == ExitCode.OUTPUT_EXISTS and "exists already" in err and "--overwrite" in err
    assert "Traceback" not in err and out.read_bytes() == b"my earlier take"
    code, text = run_cli(job_args(models, photo, vfr_clip, out, "--overwrite"))
    assert code == 0, text
    assert len(video_times(out)) == 60


def test_a_truncated_input_says_how_much_was_processed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, models: Path, photo: Path
) -> None:
    whole = write_clip(tmp_path / "whole.mkv", 100, audio=False)
    cut = tmp_path / "cut.mkv"
    data = whole.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])  # a download cut short
    out = tmp_path / "out.mkv"
    code, _ = run_cli(job_args(models, photo, cut, out))
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ENDS_EARLY, err
    assert "of ~100 frames: the input ends early" in err and "Traceback" not in err
    processed = int(err.split("processed ")[1].split(" ")[0])
    assert 30 <= processed < 100 and len(video_times(out)) == processed


_KILLABLE = """
import sys
sys.path.insert(0, {root!r})
import main
sys.exit(main.main({args!r}))
"""


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """The run in its own process; its output goes to `log` (a pipe nobody reads while it runs
    could fill and block it)."""
    code = _KILLABLE.format(root=str(REPO_ROOT), args=args)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT, **CHILD_SIGNALS
        )


def _wait_for_chunks(folder: Path, n: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while len(finished_chunk_files(folder)) < n:  # (a chunk being written does not count)
        assert proc.poll() is None, "the run ended before it was cut"
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=["term", "hang-up", "kill-9"]
)
def test_a_cut_run_resumes_from_its_finished_chunks_and_equals_one_run(
    tmp_path: Path, models: Path, photo: Path, how: signal.Signals
) -> None:
    clip = write_clip(tmp_path / "long.mp4", 150, gop=5)
    whole = tmp_path / "whole.mp4"
    # Two jobs' marks carry two run ids; off, their frames compare pixel for pixel.
    args = ["--chunk-seconds", "0.4", "--set", "watermark.enabled=false"]
    assert run_cli(job_args(models, photo, clip, whole, *args))[0] == 0
    out = tmp_path / "out.mp4"
    log = tmp_path / "cut.log"
    proc = _start(job_args(models, photo, clip, out, *args), log)
    _wait_for_chunks(job_folder(out), 3, proc)
    os.kill(proc.pid, how)
    proc.wait(timeout=60)
    if how == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # a closed terminal (SIGHUP) killed the job with no word and left a partial chunk
        assert proc.returncode == 128 + how and b"Run the same command again" in log.read_bytes()
        assert not list(job_folder(out).glob(".*partial*"))
    assert not out.exists()
    finished = len(finished_chunk_files(job_folder(out)))
    assert finished >= 3
    code, text = run_cli(job_args(models, photo, clip, out, *args))
    assert code == 0, text
    assert_same_frames(out, whole)
    assert video_times(out) == video_times(clip) and audio_packets(out) == audio_packets(clip)
    assert not job_folder(out).exists()


def test_progress_shows_on_a_terminal_only(tmp_path: Path, models: Path, photo: Path, vfr_clip: Path) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    assert main.main(job_args(models, photo, vfr_clip, tmp_path / "a.mp4"), out=term) == 0
    assert "60/60" in term.getvalue() and "frame/s" in term.getvalue()
    code, text = run_cli(job_args(models, photo, vfr_clip, tmp_path / "b.mp4"))
    assert code == 0 and "frame/s" not in text and "60/60" not in text


def test_a_batch_runs_every_job_and_one_failure_stops_none(
    tmp_path: Path, models: Path, photo: Path, vfr_clip: Path
) -> None:
    targets = tmp_path / "targets"
    targets.mkdir()
    write_clip(targets / "a.mp4", 20, audio=False)
    (targets / "b.mp4").write_bytes(os.urandom(5000))  # damaged beyond reading
    write_clip(targets / "c.mkv", 20)
    results = tmp_path / "results"
    models_args = ["--models-dir", str(models), "--allow-unverified"]
    code, text = run_cli(
        [
            "jobs",
            "batch",
            "--targets",
            str(targets),
            "--output-dir",
            str(results),
            "--source",
            str(photo),
            *models_args,
        ]
    )
    assert code == ExitCode.SOME_JOBS_FAILED, text
    assert "batch: 2 of 3 jobs done, 1 failed" in text and "FAILED" in text and "b.mp4" in text
    assert sorted(p.name for p in results.iterdir()) == ["a.mp4", "c.mkv"]
    assert len(video_times(results / "c.mkv")) == 20 and audio_packets(results / "c.mkv")


def test_a_jobs_file_names_each_job(tmp_path: Path, models: Path, photo: Path, vfr_clip: Path) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text(f'[{{"input": "{vfr_clip}", "output": "one.mp4", "source": "{photo}"}}]')
    code, text = run_cli(
        ["jobs", "batch", "--jobs", str(jobs), "--models-dir", str(models), "--allow-unverified"]
    )
    assert code == 0, text
    assert len(video_times(tmp_path / "one.mp4")) == 60


SRT = "1\n00:00:00,400 --> 00:00:01,000\nHello there\n\n2\n00:00:01,200 --> 00:00:01,800\nGeneral Kenobi\n"


def test_subtitles_are_kept_where_the_container_holds_them(
    tmp_path: Path, models: Path, photo: Path, vfr_clip: Path
) -> None:
    clip = with_subtitles(write_clip(tmp_path / "base.mkv", 50), tmp_path / "film.mkv", SRT)
    out = tmp_path / "out.mkv"
    code, text = run_cli(job_args(models, photo, clip, out))
    assert code == 0, text
    assert (
        subtitle_packets(out) == subtitle_packets(clip) == [(0.4, b"Hello there"), (1.2, b"General Kenobi")]
    )
    with av.open(str(out)) as c:
        assert c.streams.subtitles[0].metadata["language"] == "eng"
    assert audio_packets(out) == audio_packets(clip)
    # MP4 cannot hold SubRip: the same lines go in as MP4's own timed text, at the same times.
    code, text = run_cli(job_args(models, photo, clip, tmp_path / "out.mp4"))
    assert code == 0, text
    assert "subtitle srt (as mov_text)" in text and "left out" not in text
    timed = [(t, data[2:]) for t, data in subtitle_packets(tmp_path / "out.mp4") if len(data) > 2]
    assert timed == [(0.4, b"Hello there"), (1.2, b"General Kenobi")]
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert c.streams.subtitles[0].codec_context.name == "mov_text"
        assert c.streams.subtitles[0].metadata["language"] == "eng"
    assert audio_packets(tmp_path / "out.mp4") == audio_packets(clip)


def test_timed_text_samples_carry_the_text_without_markup() -> None:
    from realtime.jobs.assemble import timed_text_sample

    assert timed_text_sample(b"<i>Hello</i> there") == b"\x00\x0bHello there"
    assert timed_text_sample("{\\an8}Grüß".encode()) == b"\x00\x06" + "Grüß".encode()
    assert timed_text_sample(b"") == b"\x00\x00"


def test_a_phone_video_shot_sideways_keeps_its_rotation(tmp_path: Path, models: Path, photo: Path) -> None:
    """Stored sideways with a "display rotated" tag, as phones write portrait video: the faces are
    found upright, and the output is stored and tagged as the input was (players show it the same)."""
    from tests.fixtures_media import make_test_video

    clip = make_test_video(tmp_path / "phone.mp4", frames=20, size=(96, 64), rotation=90)
    out = tmp_path / "out.mp4"
    code, text = run_cli(job_args(models, photo, clip, out, "--chunk-seconds", "0.3"))
    assert code == 0, text
    with av.open(str(out)) as c, av.open(str(clip)) as i:
        got, want = next(c.decode(video=0)), next(i.decode(video=0))
        assert (got.width, got.height, got.rotation) == (want.width, want.height, want.rotation)
        assert (got.width, got.height, got.rotation) == (96, 64, 90)
    before, after = decode(clip), decode(out)
    assert len(after) == 20
    # No face in this clip: each frame comes back as it went, in the same stored orientation.
    assert max(np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(before, after, strict=True)) < 3.0


def test_frames_lost_inside_a_damaged_input_are_told(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, models: Path, photo: Path
) -> None:
    clip = write_clip(tmp_path / "whole.mkv", 100, audio=False)
    data = bytearray(clip.read_bytes())
    n = len(data)
    data[n // 2 : n // 2 + n // 5] = bytes(n // 5)  # a fifth of the file overwritten mid-way
    bad = tmp_path / "bad.mkv"
    bad.write_bytes(bytes(data))
    out = tmp_path / "out.mkv"
    code, _ = run_cli(job_args(models, photo, bad, out))
    err = capsys.readouterr().err
    assert code == ExitCode.INPUT_ENDS_EARLY, err
    assert "of ~100 frames: frames are missing in the input (damaged at" in err
    processed = int(err.split("processed ")[1].split(" ")[0])
    assert 40 <= processed < 100 and len(video_times(out)) == processed


def test_a_resume_removes_what_a_kill_while_joining_left(
    tmp_path: Path, models: Path, photo: Path, vfr_clip: Path
) -> None:
    """A kill while the chunks were joined left a hidden 0-byte file beside the output, which no
    later run removed. (A recording's partial file with frames in it stays: it is recovered by the
    next recording of that name.)"""
    out = tmp_path / "out.mp4"
    dead = 999_999_999  # a process id no process has
    joining = tmp_path / f".out.{dead}-0badc0de.partial.mp4"  # what such a kill left, empty
    joining.touch()
    earlier = tmp_path / f".out.{dead}-0badcafe.assembling.mp4"  # the same, half-written
    earlier.write_bytes(b"\x00" * 50_000)
    recording = tmp_path / f".out.{dead}-0badbeef.partial.mp4"
    recording.write_bytes(b"\x00" * 50_000)
    code, text = run_cli(job_args(models, photo, vfr_clip, out))
    assert code == 0, text
    assert sorted(p.name for p in leftovers(tmp_path)) == [recording.name]
