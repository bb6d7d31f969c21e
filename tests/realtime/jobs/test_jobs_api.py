"""POST /v1/jobs on the server of `main.py serve`: the server's tokens, consent and limits hold;
paths stay in its jobs folder; a queued job is done by a real worker and can be followed and
cancelled."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import pytest
import requests

from models.fakes.doubles import write_all
from realtime.api import ModelOptions, job_names
from realtime.io.provenance import read_provenance
from realtime.jobs import queue
from realtime.remote import jobs_api
from realtime.remote.limits import Limits
from realtime.remote.runner import ServerThread
from realtime.remote.server import ServerConfig
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.conftest import Worker
from tests.realtime.jobs.media import audio_packets, video_times, write_clip

TOKEN = "jobs-token-0123456789"


def test_the_server_and_the_queue_agree_on_the_contract() -> None:
    """One place names the queue (realtime/core/job_names.py): neither side declares its own."""
    tasks = queue.make_app("redis://127.0.0.1:1/0").tasks
    assert {job_names.JOB_TASK, job_names.CHUNK_TASK, job_names.ASSEMBLE_TASK} <= set(tasks)
    for module in (jobs_api, queue):
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        for value in (job_names.JOB_KEY, job_names.JOB_TASK, job_names.BROKER_ENV, ".facecast-job"):
            assert f'"{value}' not in source, (module.__name__, value)


@pytest.fixture
def server(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerThread]:
    monkeypatch.setenv("FACECAST_BROKER_URL", redis_url)
    write_all(tmp_path / "models")
    (tmp_path / "tokens.txt").write_text(f"alice:{TOKEN}\n", encoding="utf-8")
    config = ServerConfig(
        data_dir=tmp_path / "data",
        token_file=tmp_path / "tokens.txt",
        limits=Limits(max_streams=1),
        models=ModelOptions(models_dir=tmp_path / "models", allow_unverified=True),
        provider="cpu",
    )
    (config.data_dir / "jobs" / "in").mkdir(parents=True)
    write_clip(config.data_dir / "jobs" / "in" / "talk.mp4", 40)
    thread = ServerThread(config).start()
    yield thread
    thread.stop()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def upload_face(url: str) -> str:
    _, png = cv2.imencode(".png", astronaut_bgr()[:, ::-1].copy())
    r = requests.post(f"{url}/v1/faces?consent=yes", data=png.tobytes(), headers=auth(), timeout=10)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_a_job_posted_to_the_server_is_done_by_a_worker(
    server: ServerThread, redis_url: str, start_worker: Worker
) -> None:
    start_worker(redis_url)
    face = upload_face(server.url)
    body: dict[str, Any] = {
        "input": "in/talk.mp4",
        "output": "out/talk.mp4",
        "face": face,
        "chunk_seconds": 0.4,
    }
    r = requests.post(f"{server.url}/v1/jobs?consent=yes", json=body, headers=auth(), timeout=10)
    assert r.status_code == 201, r.text
    status_url = server.url + r.json()["status"]
    deadline = time.monotonic() + 90
    while (state := requests.get(status_url, headers=auth(), timeout=10).json()["state"]) != "SUCCESS":
        assert state not in ("FAILURE", "CANCELLED") and time.monotonic() < deadline, state
        time.sleep(0.2)
    jobs = server.server.config.data_dir / "jobs"
    out = jobs / "out" / "talk.mp4"
    assert video_times(out) == video_times(jobs / "in" / "talk.mp4")
    assert audio_packets(out) == audio_packets(jobs / "in" / "talk.mp4")
    assert read_provenance(out) is not None
    # Another token sees nothing of it.
    assert requests.get(status_url, headers=auth("wrong"), timeout=10).status_code == 401


@pytest.mark.parametrize(
    ("body", "query", "status", "words"),
    [
        ({"input": "in/talk.mp4", "output": "o.mp4"}, "", 403, "consent"),
        ({"input": "../../etc/passwd", "output": "o.mp4"}, "?consent=yes", 422, "inside"),
        ({"input": "in/missing.mp4", "output": "o.mp4"}, "?consent=yes", 422, "No input"),
        ({"input": "in/talk.mp4", "output": "in/talk.mp4"}, "?consent=yes", 409, "exists"),
        ({"input": "in/talk.mp4", "output": "o.mp4", "set": ["pipeline.provider=cuda"]}, "?consent=yes", 422,
         "server's to choose"),
    ],
    ids=["no-consent", "outside", "missing", "exists", "server-setting"],
)  # fmt: skip
def test_bad_job_requests_are_refused_with_a_reason(
    server: ServerThread, body: dict[str, Any], query: str, status: int, words: str
) -> None:
    body = {**body, "face": upload_face(server.url)}
    r = requests.post(f"{server.url}/v1/jobs{query}", json=body, headers=auth(), timeout=10)
    assert r.status_code == status and words in r.json()["error"], r.text


def test_a_queued_job_can_be_cancelled(server: ServerThread) -> None:
    body = {"input": "in/talk.mp4", "output": "out/never.mp4", "face": upload_face(server.url)}
    r = requests.post(f"{server.url}/v1/jobs?consent=yes", json=body, headers=auth(), timeout=10)
    assert r.status_code == 201, r.text
    job = server.url + r.json()["status"]
    r = requests.delete(job, headers=auth(), timeout=10)
    assert r.status_code == 202 and r.json()["state"] == "CANCELLED"
    assert requests.get(job, headers=auth(), timeout=10).json()["state"] == "CANCELLED"
    assert not (server.server.config.data_dir / "jobs" / "out" / "never.mp4").exists()


def test_without_a_queue_the_routes_say_so(
    tmp_path: Path, server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FACECAST_BROKER_URL")
    config = server.server.config
    other = ServerThread(config).start()
    try:
        r = requests.post(f"{other.url}/v1/jobs?consent=yes", json={}, headers=auth(), timeout=10)
        assert r.status_code == 503 and "no job queue" in r.json()["error"]
    finally:
        other.stop()
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)
