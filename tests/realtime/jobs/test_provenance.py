"""Every video a file job writes carries Content Credentials: a signed C2PA manifest saying that
faces were changed by AI, by FaceCast and its version, which c2pa reads back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import av
import cv2
import pytest

from models.fakes.doubles import write_all
from realtime.io.provenance import (
    AI_MODIFIED_TEXT,
    DIGITAL_SOURCE_TYPE,
    PROVENANCE_DIR_ENV,
    facecast_version,
    read_provenance,
)
from realtime.jobs.filejob import JobSpec, build_stages, run_file_job
from realtime.tools.bench import astronaut_bgr
from tests.realtime.jobs.media import decode, write_clip


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JobSpec:
    monkeypatch.setenv(PROVENANCE_DIR_ENV, str(tmp_path / "keys"))
    write_all(tmp_path / "models")
    cv2.imwrite(str(tmp_path / "me.png"), astronaut_bgr()[:, ::-1].copy())
    clip = write_clip(tmp_path / "in.mp4", 20)
    return JobSpec(
        input=str(clip),
        output=str(tmp_path / "out.mp4"),
        source=(str(tmp_path / "me.png"),),
        models_dir=str(tmp_path / "models"),
        allow_unverified=True,
    )


def test_the_output_carries_a_signed_ai_modified_manifest(tmp_path: Path, spec: JobSpec) -> None:
    settings, stages = build_stages(spec)
    run_file_job(spec, settings, stages)
    out = Path(spec.output)
    manifest = read_provenance(out)
    assert manifest is not None
    assert manifest["claim_generator_info"][0]["name"] == "FaceCast"
    assert manifest["claim_generator_info"][0]["version"] == facecast_version()
    actions = next(a for a in manifest["assertions"] if a["label"].startswith("c2pa.actions"))["data"][
        "actions"
    ]
    assert any(a.get("description") == AI_MODIFIED_TEXT for a in actions)
    assert all(a["digitalSourceType"] == DIGITAL_SOURCE_TYPE for a in actions)
    assert len(decode(out)) == 20  # still a plain, playable video
    assert (tmp_path / "keys" / "key.pem").stat().st_mode & 0o077 == 0  # the key is the user's alone
    # The second file is signed with the same key: made once, on first use.
    chain = (tmp_path / "keys" / "chain.pem").read_bytes()
    run_file_job(dataclasses.replace(spec, output=str(tmp_path / "two.mp4")), settings, stages)
    assert (tmp_path / "keys" / "chain.pem").read_bytes() == chain
    assert read_provenance(tmp_path / "two.mp4") is not None


def test_other_containers_say_it_in_their_tags(tmp_path: Path, spec: JobSpec) -> None:
    settings, stages = build_stages(spec)
    mkv = dataclasses.replace(spec, output=str(tmp_path / "out.mkv"))
    run_file_job(mkv, settings, stages)
    with av.open(mkv.output) as c:
        assert c.metadata.get("COMMENT", c.metadata.get("comment")) == AI_MODIFIED_TEXT


def test_a_disk_too_full_to_sign_keeps_the_output_unsigned_with_a_warning(
    tmp_path: Path, spec: JobSpec
) -> None:
    """Signing writes a second copy; on a disk without room for it the job failed with c2pa's
    "No space left" and ~40 lines of traceback, and wrote nothing."""
    from tests.small_disk import pages_for, small_disk

    settings, stages = build_stages(spec)
    signed_size = Path(run_file_job(spec, settings, stages).output).stat().st_size
    # Room for the chunks and the joined file (about one output each), not for the signed copy.
    with small_disk(tmp_path / "disk", pages_for(signed_size) * 5 // 2) as disk:
        result = run_file_job(dataclasses.replace(spec, output=str(disk / "o.mp4")), settings, stages)
        out = Path(result.output)
        assert out == disk / "o.mp4" and len(decode(out)) == 20
        assert read_provenance(out) is None
        assert "space" in result.report.unsigned.lower()
        assert sorted(p.name for p in disk.iterdir()) == ["o.mp4"]  # no partial or job folder left
