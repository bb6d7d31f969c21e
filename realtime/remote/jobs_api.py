"""File jobs over HTTP, on the server of `main.py serve`, with its tokens and limits:

POST /v1/jobs           {"input": ..., "output": ..., "face": FACE_ID, "preset": ..., "set": [...]}
                        -> 201 {"id": ..., "status": "/v1/jobs/ID"}; needs consent=yes
GET /v1/jobs/{id}       {"id", "state", "input", "output"}
DELETE /v1/jobs/{id}    cancel: queued chunks are skipped, nothing is written -> 202

Paths are relative to the server's jobs folder (DATA_DIR/jobs, a folder every worker mounts); a
client reaches nothing outside it. The jobs go on the queue named by $FACECAST_BROKER_URL, which
`main.py worker` processes take them from; without one the routes answer 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from realtime.api import FaceCastError, ModelOptions, Settings, job_names
from realtime.remote.faces import FaceStore


class ServerConfigLike(Protocol):
    @property
    def data_dir(self) -> Path: ...
    @property
    def models(self) -> ModelOptions: ...
    @property
    def provider(self) -> str: ...


class ServerLike(Protocol):
    """What the jobs routes need of the server (realtime/remote/server.py)."""

    @property
    def config(self) -> ServerConfigLike: ...
    @property
    def faces(self) -> FaceStore: ...
    def settings_from(self, preset: str | None, overrides: list[str]) -> Settings: ...
    def _count_refusal(self, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RequestChecks:
    """The server's own checks, handed in: who the token is, and whether consent was given."""

    token_name: Callable[[web.Request], str]
    consented: Callable[[web.Request], bool]
    consent_help: str


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobsLimits:
    max_active_per_token: int = 4  # queued or running jobs one token may have at once
    max_body_bytes: int = 64 * 1024


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class JobsApi:
    def __init__(
        self,
        server: ServerLike,
        checks: RequestChecks,
        broker_url: str | None = None,
        limits: JobsLimits | None = None,
    ) -> None:
        self.server = server
        self.checks = checks
        self.broker_url = broker_url or os.environ.get(job_names.BROKER_ENV) or None
        self.limits = limits or JobsLimits()
        self.root = server.config.data_dir / "jobs"
        self._celery: Any = None
        self._redis: Any = None

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/jobs", self.post_job)
        app.router.add_get("/v1/jobs/{job_id}", self.get_job)
        app.router.add_delete("/v1/jobs/{job_id}", self.delete_job)

    # ---- the queue ---------------------------------------------------------------------------

    def _clients(self) -> tuple[Any, Any]:
        if self._celery is None:
            import redis
            from celery import Celery

            self._celery = Celery("facecast-server", broker=self.broker_url, backend=self.broker_url)
            self._celery.conf.update(
                task_serializer="json", accept_content=["json"], result_serializer="json"
            )
            self._redis = redis.Redis.from_url(str(self.broker_url), socket_timeout=5)
        return self._celery, self._redis

    def _record(self, job_id: str) -> dict[str, Any] | None:
        _, store = self._clients()
        raw = store.get(job_names.JOB_KEY + job_id)
        return None if raw is None else dict(json.loads(raw))

    def _state(self, job_id: str, record: dict[str, Any]) -> str:
        celery, _ = self._clients()
        spec = json.loads(record["spec"])
        if (job_names.job_folder(Path(spec["output"])) / job_names.CANCELLED).exists():
            return "CANCELLED"
        return str(celery.AsyncResult(job_id).state)

    def _active(self, owner: str) -> int:
        _, store = self._clients()
        count = 0
        for key in store.scan_iter(job_names.JOB_KEY + "*"):
            raw = store.get(key)
            record = json.loads(raw) if raw else {}
            if record.get("owner") == owner:
                job_id = key.decode()[len(job_names.JOB_KEY) :]
                count += self._state(job_id, record) not in job_names.FINISHED_STATES | {"CANCELLED"}
        return count

    # ---- routes ------------------------------------------------------------------------------

    def _inside(self, given: object, what: str) -> Path:
        if not isinstance(given, str) or not given.strip():
            raise FaceCastError(f'Give "{what}" as a path in the server\'s jobs folder.')
        root = self.root.resolve()
        path = (root / given).resolve()
        if path == root or not path.is_relative_to(root):
            raise FaceCastError(f'"{what}" must stay inside the server\'s jobs folder.')
        return path

    def _spec(self, body: dict[str, Any], token_name: str, job_id: str) -> dict[str, Any]:
        source = self._inside(body.get("input"), "input")
        output = self._inside(body.get("output"), "output")
        if not source.is_file():
            raise FaceCastError(f"No input {body['input']!r} in the jobs folder.")
        if output.exists() and not body.get("overwrite"):
            raise FileExistsError(f'{body["output"]} exists already; send "overwrite": true to replace it.')
        face = self.server.faces.get(str(body.get("face", "")), token_name)
        if face is None:
            raise FaceCastError('Name an uploaded face: "face": ID (POST /v1/faces first).')
        overrides = [str(o) for o in body.get("set", [])]
        settings = self.server.settings_from(body.get("preset"), overrides)  # refuses the server's own
        # The job keeps its own copy of the photo: an uploaded face expires long before a long job ends.
        photos = self.root / ".faces"
        photos.mkdir(parents=True, exist_ok=True)
        photo = photos / f"{job_id}.png"
        shutil.copyfile(face.path, photo)
        overrides.append(f"pipeline.provider={self.server.config.provider}")
        if settings.composite.disclosure_label:
            overrides.append("composite.disclosure_label=true")
        models = self.server.config.models
        chunk_s = float(body.get("chunk_seconds", 4.0))
        if not 0.0 <= chunk_s <= 600.0:
            raise FaceCastError('"chunk_seconds" must be from 0 to 600.')
        output.parent.mkdir(parents=True, exist_ok=True)
        return {
            "input": str(source),
            "output": str(output),
            "source": [str(photo)],
            "models_dir": str(models.models_dir) if models.models_dir else None,
            "allow_unverified": models.allow_unverified,
            "preset": body.get("preset"),
            "overrides": overrides,
            "chunk_s": chunk_s,
            "overwrite": bool(body.get("overwrite", False)),
        }

    async def post_job(self, request: web.Request) -> web.Response:
        if self.broker_url is None:
            return _error(503, f"This server has no job queue ({job_names.BROKER_ENV} is not set).")
        if not self.checks.consented(request):
            self.server._count_refusal("consent")
            return _error(403, self.checks.consent_help)
        if request.content_length is not None and request.content_length > self.limits.max_body_bytes:
            return _error(413, f"The job description is over {self.limits.max_body_bytes} bytes.")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "Send the job as JSON.")
        if not isinstance(body, dict):
            return _error(400, "Send the job as a JSON object.")
        token_name = self.checks.token_name(request)
        job_id = str(uuid.uuid4())
        try:
            if await asyncio.to_thread(self._active, token_name) >= self.limits.max_active_per_token:
                self.server._count_refusal("jobs_full")
                return _error(429, f"{self.limits.max_active_per_token} jobs of yours are queued or running.")
            spec = await asyncio.to_thread(self._spec, body, token_name, job_id)
            await asyncio.to_thread(self._send, job_id, spec, token_name)
        except FileExistsError as exc:
            return _error(409, str(exc))
        except FaceCastError as exc:
            return _error(422, exc.user_message())
        except OSError as exc:
            return _error(503, f"The job queue cannot be reached ({exc}).")
        log.info("job %s queued for %s: %s -> %s", job_id, token_name, spec["input"], spec["output"])
        return web.json_response({"id": job_id, "status": f"/v1/jobs/{job_id}"}, status=201)

    def _send(self, job_id: str, spec: dict[str, Any], owner: str) -> None:
        celery, store = self._clients()
        record = {"spec": json.dumps(spec), "owner": owner, "submitted": time.time()}
        store.set(job_names.JOB_KEY + job_id, json.dumps(record))
        celery.send_task(job_names.JOB_TASK, args=[json.dumps(spec)], task_id=job_id)

    async def _owned(self, request: web.Request) -> tuple[str, dict[str, Any]] | web.Response:
        if self.broker_url is None:
            return _error(503, f"This server has no job queue ({job_names.BROKER_ENV} is not set).")
        job_id = request.match_info["job_id"]
        record = await asyncio.to_thread(self._record, job_id)
        if record is None or record.get("owner") != self.checks.token_name(request):
            return _error(404, f"No job {job_id[:40]!r} of yours.")
        return job_id, record

    def _public(self, job_id: str, record: dict[str, Any]) -> dict[str, Any]:
        spec = json.loads(record["spec"])
        root = self.root.resolve()
        return {
            "id": job_id,
            "state": self._state(job_id, record),
            "input": str(Path(spec["input"]).relative_to(root)),
            "output": str(Path(spec["output"]).relative_to(root)),
        }

    async def get_job(self, request: web.Request) -> web.Response:
        owned = await self._owned(request)
        if isinstance(owned, web.Response):
            return owned
        return web.json_response(await asyncio.to_thread(self._public, *owned))

    async def delete_job(self, request: web.Request) -> web.Response:
        owned = await self._owned(request)
        if isinstance(owned, web.Response):
            return owned
        job_id, record = owned

        def cancel() -> dict[str, Any]:
            celery, _ = self._clients()
            folder = job_names.job_folder(Path(json.loads(record["spec"])["output"]))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / job_names.CANCELLED).write_text("cancelled\n", encoding="utf-8")
            celery.control.revoke(job_id)
            return self._public(job_id, record)

        return web.json_response(await asyncio.to_thread(cancel), status=202)
