"""Run one slow call (list cameras, probe modes) off the GUI thread and get its result back on it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from PyQt6.QtCore import QObject, Qt, pyqtSignal

log = logging.getLogger(__name__)


class _Call(QObject):
    finished = pyqtSignal(object, object)  # value, exception (one of them is None)


def run_in_background(
    fn: Callable[[], Any],
    on_done: Callable[[Any, Exception | None], None],
    parent: QObject,
    name: str = "gui-background",
) -> None:
    """Call fn() on a daemon thread; on_done(value, error) runs later on `parent`'s (GUI) thread."""
    call = _Call(parent)  # parented: stays alive until it has delivered

    def deliver(value: Any, error: Exception | None) -> None:
        try:
            on_done(value, error)
        finally:
            call.deleteLater()

    call.finished.connect(deliver, Qt.ConnectionType.QueuedConnection)  # type: ignore[call-arg]

    def work() -> None:
        try:
            value = fn()
        except Exception as exc:
            log.debug("%s failed: %s", name, exc)
            call.finished.emit(None, exc)
            return
        call.finished.emit(value, None)

    threading.Thread(target=work, name=name, daemon=True).start()
