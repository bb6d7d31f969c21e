"""What a client waiting on the queue hears when things go wrong: no worker, a queue that
restarts (with its data kept, or lost), a cancel, a deleted input, a wrong model. Each ends in one
line and its exit code, never a traceback or a wait without end. Real Redis, real workers."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import pytest

import main
from models.fakes.doubles import write_all
from realtime.api import ExitCode
from realtime.jobs.manifest import finished_chunk_files, job_folder
from realtime.tools.bench import astronaut_bgr
from tests.paths import REPO_ROOT
from tests.realtime.jobs.conftest import RedisServer
from tests.realtime.jobs.media import write_clip

pytestmark = pytest.mark.timeout(240)
Worker = Callable[..., "subprocess.Popen[bytes]"]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = Path(tmp_path_factory.mktemp("queue-faults"))
    write_all(folder / "models")
    cv2.imwrite(str(folder / "me.png"), astronaut_bgr()[:, ::-1].copy())
    return {
        "models": folder / "models",
        "photo": folder / "me.png",
        "clip": write_clip(folder / "c.mp4", 120),
    }


class Waiting:
    """`main.py jobs submit --wait` in a process of its own: its job id, its lines, its end."""

    def __init__(self, url: str, media: dict[str, Path], clip: Path, out: Path, *extra: str) -> None:
        cmd = [sys.executable, str(REPO_ROOT / "main.py"), "jobs", "submit", "--wait", "--broker", url,
               "--input", str(clip), "--output", str(out), "--source", str(media["photo"]),
               "--allow-unverified", "--chunk-seconds", "0.4", *extra]  # fmt: skip
        if "--models-dir" not in extra:
            cmd += ["--models-dir", str(media["models"])]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.job_id = self.proc.stdout.readline().strip()
        self.err: list[str] = []
        self._drain = threading.Thread(target=lambda: self.err.extend(self.proc.stderr or ()), daemon=True)
        self._drain.start()

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.err))

    def end(self, timeout: float = 120) -> tuple[int, str]:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._drain.join(10)
        return code, "".join(self.err)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def one_line(text: str) -> str:
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in text, text
    return errors[0]


def test_waiting_with_no_worker_says_why_and_gives_up(
    tmp_path: Path, redis_server: Callable[..., RedisServer], media: dict[str, Path]
) -> None:
    """It waited forever, silently."""
    redis = redis_server()
    waiting = Waiting(redis.url, media, media["clip"], tmp_path / "o.mp4", "--worker-wait", "2")
    code, err = waiting.end(timeout=60)
    assert code == ExitCode.NO_WORKER, err
    assert "no worker takes jobs" in err and "stays queued" in one_line(err)
    out = io.StringIO()
    assert main.main(["jobs", "status", waiting.job_id, "--broker", redis.url], out=out) == 0
    assert "queued" in out.getvalue()


def test_a_job_lost_by_a_queue_restart_is_said(
    tmp_path: Path, redis_server: Callable[..., RedisServer], media: dict[str, Path]
) -> None:
    """Redis restarted without its data: the job vanished and the client waited forever."""
    redis = redis_server(persist=False)
    waiting = Waiting(redis.url, media, media["clip"], tmp_path / "o.mp4", "--worker-wait", "120")
    wait_until(lambda: waiting.said("waiting"), 30, "the client to say it waits")
    redis.restart()
    code, err = waiting.end(timeout=60)
    assert code == ExitCode.JOB_FAILED, err
    assert "no longer on the queue" in one_line(err) and "Submit the same job again" in err


def test_a_queue_restart_that_keeps_its_data_does_not_fail_the_job(
    tmp_path: Path, redis_server: Callable[..., RedisServer], start_worker: Worker, media: dict[str, Path]
) -> None:
    """Workers cancelled their running chunks on the lost connection: every running job failed."""
    redis = redis_server(persist=True)
    start_worker(redis.url)
    out = tmp_path / "o.mp4"
    waiting = Waiting(redis.url, media, media["clip"], out)
    wait_until(lambda: bool(finished_chunk_files(job_folder(out))), 90, "a first chunk")
    redis.restart()
    code, err = waiting.end(timeout=180)
    assert code == 0, err
    assert out.is_file()


def test_a_cancelled_job_is_said_to_its_waiting_client(
    tmp_path: Path, redis_url: str, start_worker: Worker, media: dict[str, Path]
) -> None:
    """TaskRevokedError's traceback, exit 1."""
    start_worker(redis_url)
    out = tmp_path / "o.mp4"
    waiting = Waiting(redis_url, media, media["clip"], out)
    wait_until(lambda: job_folder(out).is_dir(), 90, "the job to be planned")
    assert main.main(["jobs", "cancel", waiting.job_id, "--broker", redis_url], out=io.StringIO()) == 0
    code, err = waiting.end()
    assert code == ExitCode.JOB_FAILED, err
    assert "was cancelled" in one_line(err) and not out.exists()


def test_a_job_whose_input_is_deleted_fails_in_one_line(
    tmp_path: Path, redis_url: str, start_worker: Worker, media: dict[str, Path]
) -> None:
    clip = tmp_path / "mine.mp4"
    clip.write_bytes(media["clip"].read_bytes())
    start_worker(redis_url)
    out = tmp_path / "o.mp4"
    waiting = Waiting(redis_url, media, clip, out)
    wait_until(lambda: bool(finished_chunk_files(job_folder(out))), 90, "a first chunk")
    clip.unlink()
    code, err = waiting.end()
    assert code == ExitCode.JOB_FAILED, err
    assert "mine.mp4" in one_line(err)


def test_a_job_with_a_missing_model_fails_in_one_line(
    tmp_path: Path, redis_url: str, start_worker: Worker, media: dict[str, Path]
) -> None:
    """ChordError's traceback, exit 1."""
    empty = tmp_path / "no-models"
    empty.mkdir()
    start_worker(redis_url)
    waiting = Waiting(redis_url, media, media["clip"], tmp_path / "o.mp4", "--models-dir", str(empty))
    code, err = waiting.end()
    assert code == ExitCode.JOB_FAILED, err
    line = one_line(err)
    assert "failed" in line and ".onnx" in line and "Dependency" not in line


def test_a_worker_uses_its_own_models_folder(
    tmp_path: Path, redis_url: str, start_worker: Worker, media: dict[str, Path]
) -> None:
    """`worker --models-dir` (the job names a folder this machine does not have)."""
    start_worker(redis_url, 3.0, "--models-dir", str(media["models"]), "--allow-unverified")
    out = tmp_path / "o.mp4"
    waiting = Waiting(redis_url, media, media["clip"], out, "--models-dir", str(tmp_path / "elsewhere"))
    code, err = waiting.end()
    assert code == 0, err
    assert out.is_file()
