"""The engine's hand-offs between its threads: the flow policies and the conditions that wake
each kind of waiter, under one lock."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from realtime.core.contracts import FramePlan
from realtime.core.flow import CatchUpSlot, InFlightPermits, ReorderBuffer
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings


def permits(settings: Settings, live: bool) -> int:
    """How many frames may be between capture and sink at once."""
    pipeline = settings.pipeline
    return pipeline.frames_in_flight + (0 if live else pipeline.read_ahead)


@dataclass
class Job:
    seq: int
    frame: VideoFrame
    plan: FramePlan


class Pipes:
    """All hand-off state, guarded by one lock: the slot in front of the analyser, the permits
    that bound the frames between capture and sink, the jobs waiting for a worker, and the
    reorder buffer in front of the sink. Each kind of waiter has its own condition on that lock,
    so a hand-off wakes only the thread that can act on it (one shared condition would wake every
    thread on every change: ~30 context switches per frame, a fifth of the CPU on 2 cores)."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.lock = threading.Lock()
        self.slot: CatchUpSlot[VideoFrame] = CatchUpSlot()
        self.permits = InFlightPermits(limit)
        self.jobs: deque[Job] = deque()  # analysed, waiting for a worker (<= permits)
        self.done: ReorderBuffer[VideoFrame] = ReorderBuffer()  # swapped, waiting for the sink
        self.source_done = False
        self.next_seq = 0  # next sequence number the analyser hands out
        self.analysed_all = False
        # The analyser waits for a frame in the slot and a free permit (capture, sink wake it).
        self.analyser_wake = threading.Condition(self.lock)
        # The capture thread waits for the slot to empty (files and clips only; the analyser wakes it).
        self.capture_wake = threading.Condition(self.lock)
        # Workers wait for an analysed job (the analyser wakes one).
        self.worker_wake = threading.Condition(self.lock)
        # The sink waits for the next frame in order (workers wake it).
        self.sink_wake = threading.Condition(self.lock)

    def wake_everyone(self) -> None:
        """Call with the lock held: stop, failure, end of input."""
        for cond in (self.analyser_wake, self.capture_wake, self.worker_wake, self.sink_wake):
            cond.notify_all()
