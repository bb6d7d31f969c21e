"""Live numbers: per-stage ms, fps in/out, drops, glass-to-glass latency. Thread-safe, fixed memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


@dataclass(slots=True)
class RingBuffer:
    """The last `capacity` samples, preallocated: recording never allocates."""

    capacity: int = 600
    _data: npt.NDArray[np.float64] = field(init=False, repr=False)
    _next: int = field(default=0, init=False)
    _count: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._data = np.zeros(self.capacity, dtype=np.float64)

    total: int = field(default=0, init=False)  # samples ever added (the buffer keeps the last ones)
    total_sum: float = field(default=0.0, init=False)  # their sum, for a whole-run mean

    def add(self, value: float) -> None:
        self._data[self._next] = value
        self._next = (self._next + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)
        self.total += 1
        self.total_sum += value

    def values(self) -> npt.NDArray[np.float64]:
        """The kept samples, oldest first (a full buffer's storage order is rotated)."""
        if self._count < self.capacity:
            return self._data[: self._count].copy()
        return np.concatenate((self._data[self._next :], self._data[: self._next]))

    def __len__(self) -> int:
        return self._count


@dataclass(slots=True)
class RunRecord:
    """Samples spread evenly over a whole run in fixed memory: every `stride`-th sample is kept,
    and when the buffer fills every other kept one goes and the stride doubles. For figures about
    the whole run (latency drift over two minutes), which the last-N window cannot give."""

    capacity: int = 4096
    _data: npt.NDArray[np.float64] = field(init=False, repr=False)
    _count: int = field(default=0, init=False)
    _stride: int = field(default=1, init=False)
    _seen: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.capacity < 2 or self.capacity % 2:
            raise ValueError(f"capacity must be even and at least 2, got {self.capacity}")
        self._data = np.zeros(self.capacity, dtype=np.float64)

    def add(self, value: float) -> None:
        self._seen += 1
        if (self._seen - 1) % self._stride:
            return
        if self._count == self.capacity:
            half = self.capacity // 2
            self._data[:half] = self._data[::2]
            self._count = half
            self._stride *= 2
            if (self._seen - 1) % self._stride:
                return
        self._data[self._count] = value
        self._count += 1

    def values(self) -> npt.NDArray[np.float64]:
        """The kept samples in time order, evenly spaced over the run."""
        return self._data[: self._count].copy()


@dataclass(frozen=True, slots=True)
class Summary:
    mean: float
    p50: float
    p95: float
    p99: float
    count: int

    @staticmethod
    def of(values: npt.NDArray[np.float64]) -> Summary:
        if values.size == 0:
            return Summary(0.0, 0.0, 0.0, 0.0, 0)
        p50, p95, p99 = np.percentile(values, [50, 95, 99])
        return Summary(float(values.mean()), float(p50), float(p95), float(p99), int(values.size))


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """What the CLI's --stats, the GUI's status bar and the benchmark read."""

    stages_ms: dict[str, Summary]
    latency_ms: Summary  # glass-to-glass: capture timestamp -> handed to the sink
    fps_in: float
    fps_out: float
    frames_in: int
    frames_out: int
    frames_dropped: int  # replaced at the source before processing (stale)
    faces_swapped: int
    faces_passthrough: int  # seen but not swapped (low confidence / tracking quality)
    errors: int
    faces_seen: int = 0  # faces in frames, swapped or not (a face in 10 frames counts 10)
    # The privacy fallback on the newest analysed frame: why each covered face is covered.
    fallbacks: tuple[str, ...] = ()
    frames_in_fallback: int = 0  # frames with at least one face in the fallback, this run

    def fallback_text(self) -> str:
        """ "2 faces in privacy fallback (not confirmed yet, fading in)", or "" with none."""
        n = len(self.fallbacks)
        if n == 0:
            return ""
        reasons = ", ".join(dict.fromkeys(self.fallbacks))
        return f"{n} face{'s' if n > 1 else ''} in privacy fallback ({reasons})"

    def format_line(self) -> str:
        stages = " ".join(f"{k}={v.mean:.1f}" for k, v in self.stages_ms.items())
        lat = self.latency_ms
        fallback = f"  {self.fallback_text()}" if self.fallbacks else ""
        return (
            f"in {self.fps_in:5.1f} fps  out {self.fps_out:5.1f} fps  "
            f"latency p50 {lat.p50:.0f} / p95 {lat.p95:.0f} / p99 {lat.p99:.0f} ms  "
            f"dropped {self.frames_dropped}  passthrough {self.faces_passthrough}{fallback}  [ms {stages}]"
        )


@dataclass
class Metrics:
    window: int = 600
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stages: dict[str, RingBuffer] = field(default_factory=dict, repr=False)
    _latency: RingBuffer = field(init=False, repr=False)
    _run_latency: RunRecord = field(init=False, repr=False)
    _in_times: RingBuffer = field(init=False, repr=False)
    _out_times: RingBuffer = field(init=False, repr=False)
    frames_in: int = 0
    frames_out: int = 0
    frames_dropped: int = 0
    faces_swapped: int = 0
    faces_passthrough: int = 0
    faces_seen: int = 0
    errors: int = 0
    frames_in_fallback: int = 0
    _fallbacks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._latency = RingBuffer(self.window)
        self._run_latency = RunRecord()
        self._in_times = RingBuffer(120)
        self._out_times = RingBuffer(120)

    def frame_in(self, ts: float | None = None) -> None:
        with self._lock:
            self.frames_in += 1
            self._in_times.add(time.perf_counter() if ts is None else ts)

    def frame_dropped(self) -> None:
        with self._lock:
            self.frames_dropped += 1

    def frame_out(self, capture_ts: float, now: float | None = None) -> None:
        t = time.perf_counter() if now is None else now
        with self._lock:
            self.frames_out += 1
            self._out_times.add(t)
            ms = (t - capture_ts) * 1000.0
            self._latency.add(ms)
            self._run_latency.add(ms)

    def stage(self, name: str, ms: float) -> None:
        with self._lock:
            self._add_stage(name, ms)

    def stages(self, items: Iterable[tuple[str, float]]) -> None:
        """Several stages' ms at once, under one lock (a frame's analysis or swap timings)."""
        with self._lock:
            for name, ms in items:
                self._add_stage(name, ms)

    def _add_stage(self, name: str, ms: float) -> None:
        """(Under self._lock.)"""
        buf = self._stages.get(name)
        if buf is None:
            buf = self._stages[name] = RingBuffer(self.window)
        buf.add(ms)

    def faces(self, swapped: int, passthrough: int, seen: int = 0) -> None:
        with self._lock:
            self.faces_swapped += swapped
            self.faces_passthrough += passthrough
            self.faces_seen += max(seen, swapped + passthrough)

    def fallbacks(self, reasons: tuple[str, ...]) -> None:
        """The faces in the privacy fallback on the frame just analysed (and why)."""
        with self._lock:
            self._fallbacks = reasons
            self.frames_in_fallback += bool(reasons)

    def error(self) -> None:
        with self._lock:
            self.errors += 1

    def latencies_ms(self, whole_run: bool = False) -> npt.NDArray[np.float64]:
        """Glass-to-glass latencies in time order: the recent window, or samples spread evenly
        over the whole run (`whole_run`, for drift and end-of-run figures)."""
        with self._lock:
            return self._run_latency.values() if whole_run else self._latency.values()

    def stage_means(self) -> dict[str, float]:
        """Each stage's mean ms over the whole run (the snapshot's are over the recent window)."""
        with self._lock:
            return {name: buf.total_sum / buf.total for name, buf in self._stages.items() if buf.total}

    def stage_count(self, name: str) -> int:
        """How often a stage ran over the whole run (the window keeps only the last samples)."""
        with self._lock:
            buf = self._stages.get(name)
            return 0 if buf is None else buf.total

    def snapshot(self, now: float | None = None) -> StatsSnapshot:
        t = time.perf_counter() if now is None else now
        with self._lock:
            return StatsSnapshot(
                stages_ms={k: Summary.of(v.values()) for k, v in self._stages.items()},
                latency_ms=Summary.of(self._latency.values()),
                fps_in=_rate(self._in_times.values(), t),
                fps_out=_rate(self._out_times.values(), t),
                frames_in=self.frames_in,
                frames_out=self.frames_out,
                frames_dropped=self.frames_dropped,
                faces_swapped=self.faces_swapped,
                faces_passthrough=self.faces_passthrough,
                errors=self.errors,
                faces_seen=self.faces_seen,
                fallbacks=self._fallbacks,
                frames_in_fallback=self.frames_in_fallback,
            )


STALL_S = 1.0  # no frame for this long: the rate counts the silence, so a freeze shows as one


def _rate(times: npt.NDArray[np.float64], now: float) -> float:
    if times.size < 2:
        return 0.0
    oldest, newest = float(times.min()), float(times.max())
    # Measured to `now` once frames stopped coming: the last 120 timestamps alone would keep
    # showing the old 30 fps through a frozen pipeline.
    end = now if now - newest > STALL_S else newest
    span = end - oldest
    return (times.size - 1) / span if span > 0 else 0.0
