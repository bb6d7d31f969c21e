"""Inputs and outputs in S3-compatible storage, against a local moto server: the same command
takes s3:// in and out, on this machine or on the queue's workers."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import boto3
import cv2
import pytest

import main
from models.fakes.doubles import write_all
from realtime.api import ExitCode
from realtime.io.provenance import read_provenance
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.conftest import Worker, free_port
from tests.realtime.jobs.media import audio_packets, video_times, write_clip

BUCKET = "footage"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(tmp_path: Path, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> object:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "FACECAST_S3_ENDPOINT": moto_endpoint,
        "FACECAST_JOBS_DIR": str(tmp_path / "work"),
        "FACECAST_PROVENANCE_DIR": str(tmp_path / "keys"),
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def inputs(tmp_path: Path, s3: object) -> tuple[Path, Path, Path]:
    write_all(tmp_path / "models")
    cv2.imwrite(str(tmp_path / "me.png"), astronaut_bgr()[:, ::-1].copy())
    clip = write_clip(tmp_path / "talk.mp4", 40, gop=10)
    s3.upload_file(str(clip), BUCKET, "in/talk.mp4")  # type: ignore[attr-defined]
    return tmp_path / "models", tmp_path / "me.png", clip


def run_args(models: Path, photo: Path, src: str, dst: str, *extra: str) -> list[str]:
    return ["run", "--models-dir", str(models), "--allow-unverified", "--source", str(photo),
            "--input", src, "--output", dst, *extra]  # fmt: skip


def download(s3: object, key: str, to: Path) -> Path:
    s3.download_file(BUCKET, key, str(to))  # type: ignore[attr-defined]
    return to


def test_s3_in_and_out_on_this_machine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, s3: object, inputs: tuple[Path, Path, Path]
) -> None:
    models, photo, clip = inputs
    out = io.StringIO()
    code = main.main(
        run_args(models, photo, f"s3://{BUCKET}/in/talk.mp4", f"s3://{BUCKET}/out/talk.mp4"), out=out
    )
    assert code == 0, out.getvalue()
    assert f"done: s3://{BUCKET}/out/talk.mp4" in out.getvalue()
    got = download(s3, "out/talk.mp4", tmp_path / "got.mp4")
    assert video_times(got) == video_times(clip) and audio_packets(got) == audio_packets(clip)
    assert read_provenance(got) is not None
    # The same output again: refused, the object untouched.
    code = main.main(run_args(models, photo, f"s3://{BUCKET}/in/talk.mp4", f"s3://{BUCKET}/out/talk.mp4"))
    err = capsys.readouterr().err
    assert code == ExitCode.OUTPUT_EXISTS and "exists already" in err
    # A missing object: one line.
    code = main.main(run_args(models, photo, f"s3://{BUCKET}/in/nope.mp4", f"s3://{BUCKET}/out/nope.mp4"))
    err = capsys.readouterr().err
    assert code == 2 and "not found" in err and "Traceback" not in err


def test_s3_jobs_on_the_queue(
    tmp_path: Path, s3: object, inputs: tuple[Path, Path, Path], redis_url: str, start_worker: Worker
) -> None:
    models, photo, clip = inputs
    start_worker(redis_url)
    start_worker(redis_url)
    out = io.StringIO()
    args = ["jobs", "submit", "--broker", redis_url, "--wait", "--input", f"s3://{BUCKET}/in/talk.mp4",
            "--output", f"s3://{BUCKET}/out/queued.mp4", "--source", str(photo), "--models-dir", str(models),
            "--allow-unverified", "--chunk-seconds", "0.4"]  # fmt: skip
    code = main.main(args, out=out)
    assert code == 0, out.getvalue()
    got = download(s3, "out/queued.mp4", tmp_path / "queued.mp4")
    assert video_times(got) == video_times(clip) and audio_packets(got) == audio_packets(clip)
