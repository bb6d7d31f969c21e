"""Inputs and outputs in S3-compatible storage (s3://BUCKET/KEY), next to plain paths on a shared
folder. A job works on local files: its input is fetched into the work folder once (atomically;
workers that share the folder share the copy) and its output is uploaded when it is finished, in
one PUT, so the object appears whole or not at all.

The endpoint is $FACECAST_S3_ENDPOINT (MinIO, Ceph, ...; unset: AWS), the credentials boto3's own
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, a profile, an instance role).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from realtime.api import SinkError, SourceError

log = logging.getLogger(__name__)

S3_ENDPOINT_ENV = "FACECAST_S3_ENDPOINT"
WORK_DIR_ENV = "FACECAST_JOBS_DIR"


@dataclass(frozen=True, slots=True)
class S3Url:
    bucket: str
    key: str

    @staticmethod
    def parse(text: str) -> S3Url:
        rest = text[len("s3://") :]
        bucket, _, key = rest.partition("/")
        if not bucket or not key or key.endswith("/"):
            raise SourceError(f"{text} is not an S3 object: give s3://BUCKET/KEY.")
        return S3Url(bucket, key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def is_s3(text: str) -> bool:
    return text.startswith("s3://")


def work_dir() -> Path:
    given = os.environ.get(WORK_DIR_ENV)
    return Path(given) if given else Path(platformdirs.user_cache_dir("FaceCast")) / "jobs"


def _client() -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get(S3_ENDPOINT_ENV) or None)


def _say(err: Exception) -> str:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', '')} {error.get('Message', '')}".strip() or str(err)
    return str(err)


def _head(url: S3Url) -> dict[str, Any] | None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return dict(_client().head_object(Bucket=url.bucket, Key=url.key))
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise SourceError(f"Cannot reach {url} ({_say(err)}).") from err
    except BotoCoreError as err:
        raise SourceError(f"Cannot reach {url} ({err}).") from err


def exists(text: str) -> bool:
    return _head(S3Url.parse(text)) is not None if is_s3(text) else Path(text).exists()


def fetch(text: str, folder: Path | None = None) -> Path:
    """The local copy of s3://... (downloaded now unless this version is there already)."""
    from botocore.exceptions import BotoCoreError, ClientError

    url = S3Url.parse(text)
    head = _head(url)
    if head is None:
        raise SourceError(f"Video file not found: {url}")
    version = hashlib.sha256(f"{url}:{head.get('ETag', '')}".encode()).hexdigest()[:16]
    target = (folder or work_dir()) / "inputs" / version / Path(url.key).name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        _client().download_file(url.bucket, url.key, str(temp))
        os.replace(temp, target)
    except (ClientError, BotoCoreError, OSError) as err:
        temp.unlink(missing_ok=True)
        raise SourceError(f"Could not fetch {url} ({_say(err)}).") from err
    return target


def upload(local: Path, text: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    url = S3Url.parse(text)
    try:
        _client().upload_file(str(local), url.bucket, url.key)
    except (ClientError, BotoCoreError, OSError) as err:
        raise SinkError(f"Could not upload to {url} ({_say(err)}); the result is kept in {local}.") from err


def local_output(text: str, folder: Path | None = None) -> Path:
    """Where a job whose output is s3://... builds it: one place per output, so a job run again
    (or by another worker sharing the folder) finds its finished chunks."""
    name = hashlib.sha256(text.encode()).hexdigest()[:16]
    return (folder or work_dir()) / "outputs" / name / Path(S3Url.parse(text).key).name


def output_path(text: str) -> Path:
    """Where a job's output is built on this machine (the job's folder sits beside it)."""
    return local_output(text) if is_s3(text) else Path(text)


@dataclass(frozen=True, slots=True)
class Placed:
    """A job's spec with local paths, and where the finished file goes (None: it is there)."""

    spec: Any  # JobSpec (typed loosely: this module sits under filejob)
    upload_to: str | None


def place(spec: Any) -> Placed:
    """Local paths for a spec that names S3 objects; a plain spec stays as it is."""
    if not is_s3(spec.input) and not is_s3(spec.output):
        return Placed(spec, None)
    changes: dict[str, str] = {}
    if is_s3(spec.output):
        if not spec.overwrite and exists(spec.output):
            from realtime.jobs.errors import OutputExistsError

            raise OutputExistsError(f"{spec.output} exists already.", hint="Pass --overwrite to replace it.")
        changes["output"] = str(local_output(spec.output))
    if is_s3(spec.input):
        changes["input"] = str(fetch(spec.input))
    return Placed(dataclasses.replace(spec, **changes), spec.output if is_s3(spec.output) else None)


def deliver(placed: Placed) -> None:
    """Upload the finished file where the spec asked for it, then drop the local copy."""
    if placed.upload_to is None:
        return
    local = Path(placed.spec.output)
    upload(local, placed.upload_to)
    try:
        local.unlink()
        local.parent.rmdir()
    except OSError as err:
        log.debug("Could not tidy %s: %s", local, err)
