"""What ONNX Runtime prints while a session is created, captured (OutputCapture), and long work
run on a thread with a heartbeat (run_with_heartbeat)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO, TypeVar, cast

log = logging.getLogger(__name__)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ORT_LOG_LINE = re.compile(r"\[[VIWEF]:onnxruntime:")

T = TypeVar("T")


def run_with_heartbeat(work: Callable[[], T], beat: Callable[[float], None], interval_s: float) -> T:
    """Run `work` on a thread and call beat(elapsed_s) every `interval_s` until it finishes.

    ORT's session creation releases no progress information, so a heartbeat is all a user can get
    during a multi-minute TensorRT build. The thread is a daemon: Ctrl-C still ends the process.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # re-raised on the caller's thread below
            error.append(exc)

    worker = threading.Thread(target=target, name="session-build", daemon=True)
    t0 = time.perf_counter()
    worker.start()
    while True:
        worker.join(interval_s)
        if not worker.is_alive():
            break
        beat(time.perf_counter() - t0)
    if error:
        raise error[0]
    return result[0]


@functools.cache
def _capture_lock() -> threading.RLock:
    # stdout/stderr and fd 2 are process-wide: one capture at a time (cached = created once).
    return threading.RLock()


class _ThreadTee:
    """Stands in for sys.stdout/sys.stderr: writes from the watched threads are captured, the rest
    pass through, so a heartbeat printed by another thread during a capture is still seen."""

    def __init__(self, target: TextIO | None, sink: list[str], threads: set[int]) -> None:
        self._target = target
        self._sink = sink
        self._threads = threads

    def write(self, text: str) -> int:
        if threading.get_ident() in self._threads:
            self._sink.append(text)
            return len(text)
        return self._target.write(text) if self._target is not None else len(text)

    def flush(self) -> None:
        if self._target is not None:
            self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class OutputCapture:
    """Collects what ONNX Runtime prints while a session is created (see run()); the session factory
    and the doctor's provider probes both use it.

    Two channels: Python-level output ("EP Error ... Falling back" and preload_dlls' "Failed to load"
    prints, and warnings, which Python writes to sys.stderr) from the threads given to run(), and ORT's
    C++ logger on file descriptor 2. fd 2 is process-wide, so a reader thread forwards every line that
    is not an ORT log record to the real stderr at once: only ORT's own lines are withheld (they are
    summarised in factory.fallbacks or the doctor's report instead). text() is complete once the
    `with` block has ended.
    """

    def __init__(self) -> None:
        self._python: list[str] = []
        self._native: list[str] = []
        self._threads: set[int] = set()
        self._saved_streams: tuple[Any, Any] = (None, None)
        self._tees: tuple[_ThreadTee, _ThreadTee] | None = None
        self._saved_fd: int | None = None
        self._reader: threading.Thread | None = None
        self._read_fd: int | None = None
        self._stack = contextlib.ExitStack()

    def run(self, work: Callable[[], T]) -> T:
        """Run `work` on the calling thread with its Python-level output captured."""
        ident = threading.get_ident()
        self._threads.add(ident)
        try:
            return work()
        finally:
            self._threads.discard(ident)

    def text(self) -> str:
        return "".join(self._python) + "".join(self._native)

    def __enter__(self) -> OutputCapture:
        self._stack.enter_context(_capture_lock())
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        self._saved_streams = (sys.stdout, sys.stderr)
        out = _ThreadTee(sys.stdout, self._python, self._threads)
        err = _ThreadTee(sys.stderr, self._python, self._threads)
        self._tees = (out, err)
        sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
        try:
            self._start_fd_capture()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stop_fd_capture()
            assert self._tees is not None
            if sys.stdout is self._tees[0]:
                sys.stdout = self._saved_streams[0]
            if sys.stderr is self._tees[1]:
                sys.stderr = self._saved_streams[1]
        finally:
            self._stack.close()

    def _start_fd_capture(self) -> None:
        try:
            saved = os.dup(2)
        except OSError as err:
            # No fd 2 at all (pythonw on Windows): only Python-level output can be captured.
            log.debug("stderr has no file descriptor to capture (%s)", err)
            return
        try:
            read_fd, write_fd = os.pipe()
        except OSError as err:
            os.close(saved)
            log.debug("no pipe for capturing stderr (%s)", err)
            return
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._saved_fd, self._read_fd = saved, read_fd
        self._reader = threading.Thread(target=self._pump, name="ort-log-capture", daemon=True)
        self._reader.start()

    def _stop_fd_capture(self) -> None:
        if self._saved_fd is None:
            return
        # Restoring fd 2 closes the pipe's last write end, so the reader sees EOF and ends.
        os.dup2(self._saved_fd, 2)
        if self._reader is not None:
            self._reader.join(timeout=5.0)
            if self._reader.is_alive():
                log.warning("the ONNX Runtime log reader did not finish; some log lines may be lost")
        if self._read_fd is not None:
            os.close(self._read_fd)
        os.close(self._saved_fd)
        self._saved_fd = self._read_fd = None

    def _pump(self) -> None:
        assert self._read_fd is not None and self._saved_fd is not None
        pending = b""
        while chunk := os.read(self._read_fd, 65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._route(line + b"\n")
        if pending:
            self._route(pending)

    def _route(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace")
        self._native.append(line)
        bare = _ANSI.sub("", line).strip()
        if bare and not _ORT_LOG_LINE.search(bare):
            assert self._saved_fd is not None
            os.write(self._saved_fd, raw)
