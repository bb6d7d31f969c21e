"""The inference services of one process: one per model file, session options and kind of input
(host arrays, or tensors already on the session's device), made at the first ask and shared by
every engine of the process after it (the live run, each of the server's streams, a file job's
workers).

A model published with a batch of 1 is given its batch axis here, once, and proven
(models.runtime.batch_axis); the services' sessions are those batched ones. Instances: on the CPU
they share one session (ONNX Runtime runs it from several threads); on a GPU each has a session of
its own on its own CUDA stream, so one batch's upload overlaps another's inference.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from models.runtime.batch_axis import Batched, open_batched
from models.runtime.batch_window import BatchPolicy
from models.runtime.device_batching import DeviceBatchRunner
from models.runtime.inference_service import BatchRunner, HostBatchRunner, InferenceService
from models.runtime.session import BatchProfile, SessionFactory

InputKind = Literal["host", "device"]
VERDICTS_FILE = "batching-verdicts.json"  # beside the TensorRT cache: proofs per model file


@dataclass(frozen=True, slots=True)
class ModelService:
    """A shared model: the service that runs it, and its (batched) session for the wrappers to
    read names, shapes and dtypes from."""

    service: InferenceService
    session: Any
    max_batch: int
    kind: InputKind = "host"  # what its requests hold: host arrays or device tensors
    note: str = ""  # why it runs unbatched, when it does


def _host_runner(session: Any, outputs: Sequence[str]) -> HostBatchRunner:
    names = list(outputs)
    return HostBatchRunner(lambda feeds: session.run(names, dict(feeds)))


class InferenceHub:
    """The process's inference services (module doc). Thread-safe: two engines asking for the
    same model at once get one service."""

    def __init__(self, policy: BatchPolicy | None = None) -> None:
        self.policy = policy or BatchPolicy()
        self._lock = threading.Lock()
        self._services: dict[Hashable, ModelService] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._services)

    def services(self) -> list[ModelService]:
        with self._lock:
            return list(self._services.values())

    def service(
        self,
        path: Path,
        factory: SessionFactory,
        *,
        outputs: Sequence[str] | None = None,
        kind: InputKind = "host",
        instances: int = 1,
        label: str = "",
        check: Callable[[Any], None] | None = None,
    ) -> ModelService:
        """The shared service for the model in `path` on `factory`'s device, fetching `outputs`
        (None: the first output only). check: run on the file's session before anything else (a
        contract check that refuses a wrong file)."""
        stat = path.stat()
        key = (
            str(path.resolve()),
            stat.st_size,
            stat.st_mtime_ns,
            factory.config,
            kind,
            tuple(outputs or ()),
        )
        with self._lock:
            found = self._services.get(key)
            if found is None:
                found = self._services[key] = self._open(
                    path, factory, outputs, kind, max(instances, 1), label, check
                )
            return found

    def _open(
        self,
        path: Path,
        factory: SessionFactory,
        wanted: Sequence[str] | None,
        kind: InputKind,
        instances: int,
        label: str,
        check: Callable[[Any], None] | None,
    ) -> ModelService:
        name = label or path.name
        verdicts = factory.config.cache_dir / VERDICTS_FILE if factory.config.cache_dir else None
        own_streams = kind == "device" and factory.device_type != "cpu"
        streams = [factory.new_worker_stream() if own_streams else None for _ in range(instances)]

        def opener(stream: int | None) -> Callable[[Path | bytes], Any]:
            return lambda model: factory.create(model, label=name, cuda_stream=stream)

        def profiled(stream: int | None) -> Callable[[bytes, BatchProfile], Any]:
            # run_shapes: TensorRT builds the profile's engine at load (announced), not at the
            # first frame.
            return lambda model, profile: factory.create(
                model,
                label=name,
                cuda_stream=stream,
                batch_profile=profile,
                run_shapes=[(1, *row) for _, row in profile.rows],
            )

        def batched(stream: int | None, check_first: Callable[[Any], None] | None = None) -> Batched:
            return open_batched(
                path, opener(stream), self.policy.max_batch, verdicts, check_first, profiled(stream)
            )

        opened = batched(streams[0], check)
        outputs = list(wanted) if wanted else [opened.session.get_outputs()[0].name]
        sessions = [opened.session]
        for stream in streams[1:]:
            if stream is None:
                sessions.append(opened.session)  # the CPU: one session, run from several threads
            else:
                sessions.append(batched(stream).session)
        runners: list[BatchRunner] = [
            _host_runner(session, outputs)
            if kind == "host"
            else DeviceBatchRunner(session, factory, outputs, cuda_stream=stream)
            for session, stream in zip(sessions, streams, strict=True)
        ]
        policy = self.policy if opened.max_batch > 1 else BatchPolicy(1, 0, self.policy.active_s)
        return ModelService(
            InferenceService(runners, policy, name), opened.session, opened.max_batch, kind, opened.note
        )


__all__ = ["VERDICTS_FILE", "InferenceHub", "InputKind", "ModelService"]
