"""Sessions shared by every stream of one process (the server's): each model file is opened once
per provider and options, however many streams run it.

ONNX Runtime's `InferenceSession.run` may be called from several threads at once; what is not
shared is the wrappers' own buffers (each stream builds its own wrapper around the shared
session). Sessions bound to one CUDA stream (one per in-flight worker) are never shared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import onnxruntime as ort


class SessionPool:
    """Open sessions by what they were opened with. Thread-safe; a key opens once even when
    two streams ask for it at the same moment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[Hashable, ort.InferenceSession] = {}
        self._opening: dict[Hashable, threading.Lock] = {}
        self.opened = 0  # sessions opened through the pool
        self.reused = 0  # asks answered with an open session

    def get(self, key: Hashable, open_session: Callable[[], ort.InferenceSession]) -> ort.InferenceSession:
        with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                self.reused += 1
                return session
            gate = self._opening.setdefault(key, threading.Lock())
        with gate:  # one opener per key; the others wait for its session
            with self._lock:
                session = self._sessions.get(key)
                if session is not None:
                    self.reused += 1
                    return session
            session = open_session()  # a failure leaves nothing behind: the next ask tries again
            with self._lock:
                self._sessions[key] = session
                self._opening.pop(key, None)
                self.opened += 1
            return session

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


__all__ = ["SessionPool"]
