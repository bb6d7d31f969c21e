"""One model on one device, shared by every stream of the process: requests from all of them are
batched into one model call and each result handed back to its caller.

A stream holds a `ServiceClient` (every swap worker of one engine shares its stream's client) and
submits one request per face: its inputs with a batch of 1. `Ticket.result()` waits for that
request's outputs. There is no batcher thread: the first caller that waits while no batch is being
formed leads one (leader and followers): it waits for the batch window (models.runtime.batch_window)
to close, takes up to `max_batch` requests in turns across the streams (a stream with many faces
cannot starve a stream with one), runs the model once and hands every request its rows. A lone
stream therefore runs its request on its own thread at once; with `instances` > 1, one caller forms
the next batch while another's runs (on a GPU: the next batch's upload overlaps this one's
inference, each instance on its own CUDA stream).

The service knows nothing of faces: inputs are named arrays, outputs a tuple of arrays. How the
inputs of several requests become one batch and the batch's outputs rows again is a `BatchRunner`
(host arrays here; device tensors in realtime's device path). Streams that are gone (their client
collected) or closed are forgotten; what they left queued is dropped.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from models.runtime.batch_window import BatchPolicy, BatchWindow, WindowState

Feeds = Mapping[str, Any]  # input name -> a tensor with a batch of 1 (numpy, or the runner's kind)
OVERHEAD_SAMPLES = 10_000


class ServiceClosedError(RuntimeError):
    """The request's stream was closed before its batch ran."""


class BatchRunner(Protocol):
    """Runs one batch: the requests' inputs in, one output tuple per request out."""

    def run(self, feeds: Sequence[Feeds]) -> list[tuple[Any, ...]]: ...


class HostBatchRunner:
    """A batch of numpy requests through one session: inputs stacked into reused buffers, outputs
    handed back as row views of the call's own (freshly allocated) outputs."""

    def __init__(self, run: Callable[[Mapping[str, npt.NDArray[Any]]], Sequence[Any]]) -> None:
        self._run = run
        self._buffers: dict[str, npt.NDArray[Any]] = {}

    def run(self, feeds: Sequence[Feeds]) -> list[tuple[Any, ...]]:
        n = len(feeds)
        stacked: dict[str, npt.NDArray[Any]] = {}
        for name in feeds[0]:
            first = np.asarray(feeds[0][name])
            if n == 1:
                stacked[name] = first
                continue
            buf = self._buffers.get(name)
            shape = (n, *first.shape[1:])
            if buf is None or buf.shape[0] < n or buf.shape[1:] != shape[1:] or buf.dtype != first.dtype:
                buf = self._buffers[name] = np.empty((max(n, 8), *shape[1:]), dtype=first.dtype)
            np.concatenate([np.asarray(f[name]) for f in feeds], axis=0, out=buf[:n])
            stacked[name] = buf[:n]
        outputs = [np.asarray(o) for o in self._run(stacked)]
        return [tuple(out[k : k + 1] for out in outputs) for k in range(n)]


@dataclass(eq=False)
class _Request:
    stream: _Stream
    feeds: Feeds
    submitted: float
    done: bool = False
    outputs: tuple[Any, ...] = ()
    error: BaseException | None = None
    waited_s: float = 0.0  # submitted -> its batch started
    run_s: float = 0.0  # its batch's model call
    batch_size: int = 0


@dataclass(eq=False)
class _Stream:
    name: str
    queue: deque[_Request] = field(default_factory=deque)
    last_submit: float = -1e9
    closed: bool = False
    held: int = 0  # > 0 while its requests of one frame are still being submitted

    @property
    def takeable(self) -> bool:
        """Whether a batch may take its requests now (not while held)."""
        return not self.held and bool(self.queue)


class Ticket:
    """One request's result: `result()` waits for it (leading a batch when none is forming)."""

    __slots__ = ("_request", "_service")

    def __init__(self, service: InferenceService, request: _Request) -> None:
        self._service = service
        self._request = request

    @property
    def done(self) -> bool:
        return self._request.done

    @property
    def batch_size(self) -> int:
        """How many requests shared this one's model call (0 before it ran)."""
        return self._request.batch_size

    @property
    def waited_s(self) -> float:
        """From submission to the start of its model call."""
        return self._request.waited_s

    def result(self) -> tuple[Any, ...]:
        return self._service.wait_for(self._request)


class ServiceClient:
    """A stream's handle on the service (one per engine; its swap workers share it)."""

    def __init__(self, service: InferenceService, name: str) -> None:
        self.service = service
        self._stream = _Stream(name)
        service.register(self, self._stream)

    @property
    def name(self) -> str:
        return self._stream.name

    def submit(self, feeds: Feeds) -> Ticket:
        """Queue one request (inputs with a batch of 1); its Ticket gives the outputs."""
        return self.service.submit(self._stream, feeds)

    def run(self, feeds: Feeds) -> tuple[Any, ...]:
        """submit + result, for a caller with nothing to do meanwhile."""
        return self.submit(feeds).result()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Requests submitted inside go to a batch together, once the block ends (a frame's faces:
        the batch window waits for the last of them, not the first)."""
        self.service.hold(self._stream, +1)
        try:
            yield
        finally:
            self.service.hold(self._stream, -1)

    def close(self) -> None:
        """This stream is done: it is no longer waited for; what it left queued is dropped."""
        self.service.close_stream(self._stream)


@dataclass
class ServiceStats:
    calls: int = 0
    requests: int = 0
    per_stream: dict[str, int] = field(default_factory=dict)
    # What the service added to each request (its wait for a batch and the hand-offs, not the
    # model call), seconds, the last OVERHEAD_SAMPLES requests: the bench's figure.
    overhead_s: list[float] = field(default_factory=list)

    @property
    def per_call(self) -> float:
        """Requests (faces) per model call, on average."""
        return self.requests / self.calls if self.calls else 0.0


class InferenceService:
    """One model on one device, batched across the process's streams (module doc)."""

    def __init__(
        self,
        runners: Sequence[BatchRunner],
        policy: BatchPolicy,
        name: str = "model",
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not runners:
            raise ValueError("an inference service needs at least one runner")
        self.name = name
        self.policy = policy
        self._window = BatchWindow(policy)
        self._clock = clock
        self._cond = threading.Condition()
        self.runners: tuple[BatchRunner, ...] = tuple(runners)  # its instances (for diagnostics)
        self._free = list(runners)  # the instances not running a batch
        self._streams: list[tuple[weakref.ref[ServiceClient], _Stream]] = []
        self._turn = itertools.count()  # rotates which stream is served first
        self._forming = False
        self._stats = ServiceStats()
        self._overheads: deque[float] = deque(maxlen=OVERHEAD_SAMPLES)

    @property
    def max_batch(self) -> int:
        return self.policy.max_batch

    def client(self, name: str) -> ServiceClient:
        return ServiceClient(self, name)

    def register(self, client: ServiceClient, stream: _Stream) -> None:
        with self._cond:
            self._streams.append((weakref.ref(client), stream))

    def stats(self) -> ServiceStats:
        with self._cond:
            s = self._stats
            return ServiceStats(s.calls, s.requests, dict(s.per_stream), list(self._overheads))

    def reset_stats(self) -> None:
        with self._cond:
            self._stats = ServiceStats()
            self._overheads.clear()

    # -- requests --------------------------------------------------------------------------------

    def submit(self, stream: _Stream, feeds: Feeds) -> Ticket:
        now = self._clock()
        request = _Request(stream, feeds, now)
        with self._cond:
            if stream.closed:
                raise ServiceClosedError(f"the stream {stream.name} of {self.name} is closed")
            stream.queue.append(request)
            stream.last_submit = now
            self._cond.notify_all()
        return Ticket(self, request)

    def hold(self, stream: _Stream, step: int) -> None:
        with self._cond:
            stream.held += step
            self._cond.notify_all()

    def close_stream(self, stream: _Stream) -> None:
        with self._cond:
            stream.closed = True
            for request in stream.queue:
                request.error = ServiceClosedError(f"the stream {stream.name} was closed")
                request.done = True
            stream.queue.clear()
            self._streams = [(ref, s) for ref, s in self._streams if s is not stream]
            self._cond.notify_all()

    def wait_for(self, request: _Request) -> tuple[Any, ...]:
        with self._cond:
            while not request.done:
                if not self._forming and self._free and self._queued():
                    self._lead()
                else:
                    self._cond.wait(0.05)
            self._overheads.append(max(self._clock() - request.submitted - request.run_s, 0.0))
        if request.error is not None:
            raise request.error
        return request.outputs

    # -- leading a batch (called with the lock held) ----------------------------------------------

    def _lead(self) -> None:
        self._forming = True
        try:
            batch = self._form()
            runner = self._free.pop()
        finally:
            self._forming = False
        self._cond.notify_all()  # another caller may form the next batch meanwhile
        started = self._clock()
        for request in batch:
            request.waited_s = started - request.submitted
            request.batch_size = len(batch)
        self._cond.release()
        try:
            results: list[tuple[Any, ...]] | None = runner.run([r.feeds for r in batch])
            error: BaseException | None = None
        except Exception as exc:
            results, error = None, exc
        finally:
            self._cond.acquire()
        self._free.append(runner)
        for k, request in enumerate(batch):
            if results is not None:
                request.outputs = results[k]
            request.error = error
            request.done = True
        self._stats.calls += 1
        self._stats.requests += len(batch)
        for request in batch:
            name = request.stream.name
            self._stats.per_stream[name] = self._stats.per_stream.get(name, 0) + 1
        self._cond.notify_all()

    def _form(self) -> list[_Request]:
        """Wait for the window to close, then take up to max_batch requests in turns."""
        while True:
            state = self._state()
            if self._window.ready(state):
                break
            self._cond.wait(self._window.wait_s(state))
        streams = [s for _, s in self._live() if s.takeable]
        first = next(self._turn) % len(streams)
        order = streams[first:] + streams[:first]
        batch: list[_Request] = []
        while len(batch) < self.policy.max_batch and any(s.queue for s in order):
            for stream in order:
                if stream.queue and len(batch) < self.policy.max_batch:
                    batch.append(stream.queue.popleft())
        return batch

    def _live(self) -> list[tuple[ServiceClient, _Stream]]:
        """The streams whose client still exists; the others' requests are dropped."""
        live: list[tuple[ServiceClient, _Stream]] = []
        kept: list[tuple[weakref.ref[ServiceClient], _Stream]] = []
        for ref, stream in self._streams:
            client = ref()
            if client is None:
                stream.queue.clear()  # nobody will ask for these
                continue
            live.append((client, stream))
            kept.append((ref, stream))
        self._streams = kept
        return live

    def _queued(self) -> bool:
        return any(stream.takeable for _, stream in self._streams)

    def _state(self) -> WindowState:
        now = self._clock()
        streams = [s for _, s in self._live()]
        waiting = [s for s in streams if s.takeable]
        oldest = min((s.queue[0].submitted for s in waiting), default=now)
        active = sum(1 for s in streams if s.queue or now - s.last_submit <= self.policy.active_s)
        return WindowState(
            queued=sum(len(s.queue) for s in waiting),
            streams_in=len(waiting),
            active_streams=active,
            waited_us=(now - oldest) * 1e6,
        )


__all__ = [
    "BatchRunner",
    "HostBatchRunner",
    "InferenceService",
    "ServiceClient",
    "ServiceClosedError",
    "ServiceStats",
    "Ticket",
]
