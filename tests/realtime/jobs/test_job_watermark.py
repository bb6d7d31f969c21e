"""A file job reads as one run: every chunk's frames carry the job's one watermark run id, also
after the job was stopped and resumed by another process, and the output's C2PA manifest names
that id."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import cv2
import numpy as np
import pytest

from main import main
from models.errors import ExitCode
from models.fakes.doubles import write_all
from realtime.core.watermark.detect import MarkDetector
from realtime.core.watermark.payload import Payload
from realtime.jobs.errors import JobInterrupted
from realtime.jobs.filejob import JobSpec, StopRequest, build_stages, run_file_job
from realtime.jobs.manifest import Manifest, finished_chunk_files, job_folder, read_manifest
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.media import decode, write_clip

FRAMES, SIZE = 50, (640, 360)


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> JobSpec:
    folder = Path(tmp_path_factory.mktemp("job_mark"))
    write_all(folder / "models")
    cv2.imwrite(str(folder / "me.png"), astronaut_bgr()[:, ::-1].copy())
    clip = write_clip(folder / "clip.mp4", FRAMES, SIZE, gop=5)
    return JobSpec(
        input=str(clip),
        output="",
        source=(str(folder / "me.png"),),
        models_dir=str(folder / "models"),
        allow_unverified=True,
        chunk_s=0.4,
    )


def read_mark(frames: list[np.ndarray]) -> Payload | None:
    detector = MarkDetector()
    for image in frames:
        detector.add(image)
    found = detector.decide(wide=False)
    return found.payload if found.marked else None


def test_a_stopped_and_resumed_job_carries_one_run_id_in_every_chunk_and_its_manifest(
    tmp_path: Path, spec: JobSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FACECAST_PROVENANCE_DIR", str(tmp_path / "key"))
    job = dataclasses.replace(spec, output=str(tmp_path / "out.mp4"))
    settings, stages = build_stages(job)
    stop = StopRequest()

    def stop_in_the_third_chunk(done: int, total: int) -> None:
        if done >= 25:
            stop.request(15)

    with pytest.raises(JobInterrupted):
        run_file_job(job, settings, stages, stop, stop_in_the_third_chunk)
    folder = job_folder(Path(job.output))
    kept = len(finished_chunk_files(folder))
    assert 2 <= kept < 5
    plan = read_manifest(folder)
    assert plan is not None and len(plan.run_id) == 8

    settings, stages = build_stages(job)  # the resume: a new process would build its own
    run_file_job(job, settings, stages)
    frames = decode(Path(job.output))
    assert len(frames) == FRAMES
    before, after = read_mark(frames[: 10 * kept]), read_mark(frames[10 * kept :])
    assert before is not None and after is not None
    assert before.run_id == after.run_id == plan.run_id

    out = io.StringIO()
    assert main(["verify", job.output], out=out) == ExitCode.OK
    text = out.getvalue()
    assert f"run {plan.run_id}" in text and "the same run as the watermark" in text


def test_a_plan_written_before_run_ids_gets_one_id_that_every_worker_derives_alike() -> None:
    old = (
        '{"input": "in.mp4", "input_identity": "123:456", "output": "out.mp4", "settings_key": "abc",'
        ' "time_base": "1/12800", "chunks": [], "expected_frames": 0, "version": 1}'
    )
    one, two = Manifest.from_json(old), Manifest.from_json(old)
    assert one.run_id == "" and len(one.mark_id) == 8 and one.mark_id == two.mark_id
    int(one.mark_id, 16)  # 8 hex digits, as a run id is
    other = Manifest.from_json(old.replace("abc", "abd"))
    assert other.mark_id != one.mark_id
    fresh = dataclasses.replace(one, run_id="0badcafe")
    assert Manifest.from_json(fresh.to_json()).mark_id == "0badcafe"
