"""Chunks join without a seam a viewer could see, and two worker processes write the very file
one process writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import pytest

from models.fakes.doubles import write_all
from realtime.jobs.bench import Landmarks, _seam_figures, recording
from realtime.jobs.chunks import plan_chunks
from realtime.jobs.filejob import JobSpec, build_stages, run_file_job
from realtime.jobs.probe import probe
from realtime.jobs.process_pool import run_with_workers
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.media import assert_same_frames, audio_packets, video_times, write_clip


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> JobSpec:
    folder = Path(tmp_path_factory.mktemp("seams"))
    write_all(folder / "models")
    cv2.imwrite(str(folder / "me.png"), astronaut_bgr()[:, ::-1].copy())
    clip = write_clip(folder / "clip.mp4", 100, (256, 192), gop=25)
    return JobSpec(
        input=str(clip),
        output="",
        source=(str(folder / "me.png"),),
        models_dir=str(folder / "models"),
        allow_unverified=True,
        # Two jobs' marks carry two run ids; off, their frames compare pixel for pixel.
        overrides=("detector.model=mtcnn", "watermark.enabled=false"),
        chunk_s=1.0,
    )


def test_the_warm_up_keeps_the_face_steady_across_seams(tmp_path: Path, base: JobSpec) -> None:
    settings, stages = build_stages(base)
    single, warm, cold = Landmarks(), Landmarks(), Landmarks()
    one = dataclasses.replace(base, output=str(tmp_path / "one.mp4"), chunk_s=0)
    run_file_job(one, settings, recording(stages, single))
    run_file_job(
        dataclasses.replace(base, output=str(tmp_path / "warm.mp4")), settings, recording(stages, warm)
    )
    no_warmup = dataclasses.replace(base, output=str(tmp_path / "cold.mp4"), warmup_frames=0)
    run_file_job(no_warmup, settings, recording(stages, cold))
    info = probe(Path(base.input))
    seams = [info.seconds(c.start_pts) for c in plan_chunks(info, base.chunk_s)[1:]]
    assert len(seams) == 3
    warm_px, warm_dip = _seam_figures(single, warm, seams)
    cold_px, cold_dip = _seam_figures(single, cold, seams)
    assert cold_dip > 0.3  # without the warm-up the face fades out and in again at every seam
    assert warm_dip < 0.05 and warm_px < 1.0  # with it, the seam frames match the single pass
    assert warm_px < cold_px


def test_two_workers_write_what_one_process_writes(tmp_path: Path, base: JobSpec) -> None:
    settings, stages = build_stages(base)
    one = dataclasses.replace(base, output=str(tmp_path / "one.mp4"))
    run_file_job(one, settings, stages)
    two = dataclasses.replace(base, output=str(tmp_path / "two.mp4"))
    result = run_with_workers(two, 2)
    assert result.chunks == 4
    assert_same_frames(Path(two.output), Path(one.output))
    assert video_times(Path(two.output)) == video_times(Path(base.input))
    assert audio_packets(Path(two.output)) == audio_packets(Path(base.input))
