"""File jobs on the queue: real Redis, real workers. A long video is shared out as chunks; a
worker killed mid-chunk costs nothing but time; the output equals a one-machine run."""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import pytest

import main
from models.fakes.doubles import write_all
from realtime.jobs.filejob import JobSpec, build_stages, run_file_job
from realtime.jobs.manifest import job_folder
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.media import assert_same_frames, audio_packets, video_times, write_clip

Worker = Callable[..., subprocess.Popen[bytes]]
# Two jobs carry two run ids in their marks; off, their frames compare pixel for pixel
# (one job's single mark across chunks and machines: tests/realtime/jobs/test_job_watermark.py).
NO_MARK = "watermark.enabled=false"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[JobSpec, Path]:
    folder = Path(tmp_path_factory.mktemp("queue"))
    write_all(folder / "models")
    cv2.imwrite(str(folder / "me.png"), astronaut_bgr()[:, ::-1].copy())
    clip = write_clip(folder / "long.mp4", 200, gop=10)
    spec = JobSpec(
        input=str(clip),
        output=str(folder / "reference.mp4"),
        source=(str(folder / "me.png"),),
        models_dir=str(folder / "models"),
        allow_unverified=True,
        overrides=(NO_MARK,),
        chunk_s=0.4,
    )
    settings, stages = build_stages(spec)
    run_file_job(spec, settings, stages)  # the one-machine run the queue must match
    return spec, Path(spec.output)


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main.main(list(args), out=out), out.getvalue()


def submit_args(spec: JobSpec, output: Path, url: str, *extra: str) -> list[str]:
    return ["jobs", "submit", "--broker", url, "--input", spec.input, "--output", str(output),
            "--source", *spec.source, "--models-dir", str(spec.models_dir), "--allow-unverified",
            "--chunk-seconds", str(spec.chunk_s), "--set", NO_MARK, *extra]  # fmt: skip


def assert_same_as(reference: Path, output: Path, clip: Path) -> None:
    assert_same_frames(output, reference)
    assert video_times(output) == video_times(clip) and audio_packets(output) == audio_packets(clip)


def test_two_workers_share_a_job_and_match_one_machine(
    tmp_path: Path, redis_url: str, start_worker: Worker, setup: tuple[JobSpec, Path]
) -> None:
    spec, reference = setup
    start_worker(redis_url)
    start_worker(redis_url)
    out = tmp_path / "queued.mp4"
    code, text = cli(*submit_args(spec, out, redis_url, "--wait"))
    assert code == 0, text
    assert "done:" in text and "20 chunks" in text
    assert_same_as(reference, out, Path(spec.input))
    job_id = text.splitlines()[0]
    code, listed = cli("jobs", "list", "--broker", redis_url)
    assert code == 0 and job_id in listed and "SUCCESS" in listed
    code, line = cli("jobs", "status", job_id, "--broker", redis_url)
    # It said "SUCCESS not planned yet": the plan's folder is gone once the job is done.
    assert code == 0 and "finished" in line and "not planned" not in line and f"{out} written" in line


def _writer_group(folder: Path) -> int | None:
    """The process group of whoever writes a chunk now (the PID is in the partial file's name)."""
    for partial in folder.glob(".chunk-*.writing.*.partial.nut"):
        pid = int(partial.name.split(".writing.")[1].split("-")[0])
        try:
            return os.getpgid(pid)
        except ProcessLookupError:
            continue
    return None


def test_a_worker_killed_mid_chunk_loses_nothing(
    tmp_path: Path, redis_url: str, start_worker: Worker, setup: tuple[JobSpec, Path]
) -> None:
    spec, reference = setup
    workers = {start_worker(redis_url).pid: None, start_worker(redis_url).pid: None}
    out = tmp_path / "survived.mp4"
    code, text = cli(*submit_args(spec, out, redis_url))
    assert code == 0, text
    job_id = text.strip()
    folder = job_folder(out)
    deadline = time.monotonic() + 60
    while (group := _writer_group(folder)) not in workers:
        assert time.monotonic() < deadline, "no worker started a chunk"
        time.sleep(0.005)
    os.killpg(group, signal.SIGKILL)  # mid-chunk: the worker and its pool, at once
    from realtime.jobs import queue

    app = queue.make_app(redis_url)
    value = queue.wait(app, job_id, timeout_s=120)
    assert value["frames"] == 200 and value["chunks"] == 20
    assert_same_as(reference, out, Path(spec.input))


def test_cancel_stops_a_job_and_writes_nothing(
    tmp_path: Path, redis_url: str, setup: tuple[JobSpec, Path]
) -> None:
    spec, _ = setup
    out = tmp_path / "cancelled.mp4"
    code, text = cli(*submit_args(spec, out, redis_url))  # no worker: it stays queued
    job_id = text.strip()
    code, text = cli("jobs", "cancel", job_id, "--broker", redis_url)
    assert code == 0 and "CANCELLED" in text
    code, text = cli("jobs", "status", job_id, "--broker", redis_url)
    assert code == 0 and "CANCELLED" in text and not out.exists()


def test_an_unreachable_queue_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, setup: tuple[JobSpec, Path]
) -> None:
    from tests.realtime.jobs.conftest import free_port

    spec, _ = setup
    code, _ = cli(*submit_args(spec, tmp_path / "o.mp4", f"redis://127.0.0.1:{free_port()}/0"))
    err = capsys.readouterr().err
    assert code == 13 and "cannot be reached" in err and "Traceback" not in err


def test_with_no_queue_the_job_runs_here(
    tmp_path: Path, setup: tuple[JobSpec, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, reference = setup
    monkeypatch.delenv("FACECAST_BROKER_URL", raising=False)
    out = tmp_path / "here.mp4"
    args = submit_args(spec, out, "")
    args.remove("--broker")
    args.remove("")
    code, text = cli(*args, "--workers", "2")
    assert code == 0, text
    assert_same_as(reference, out, Path(spec.input))


__all__ = ["dataclasses"]
