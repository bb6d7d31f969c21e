"""`python main.py` with no subcommand: the control panel."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QApplication, QDialog, QWidget

from gui.config import ConfigStore, GuiConfig, LoadResult
from gui.consent import ConsentDialog
from gui.main_window import MainWindow
from gui.services import AppServices
from gui.theme import apply_dark_theme

log = logging.getLogger(__name__)

LOAD_WAIT_AT_EXIT_S = 10.0


def ask_consent(config: GuiConfig, store: ConfigStore) -> GuiConfig | None:
    """The first-run dialog; the answer is stored so it is asked once. None: the user declined."""
    if config.consent_accepted:
        return config
    if ConsentDialog().exec() != QDialog.DialogCode.Accepted:
        return None
    config = replace(config, consent_accepted=True)
    with contextlib.suppress(OSError):  # saved again on exit, where a failure is reported
        store.save(config)
    return config


def create_window(services: AppServices, loaded: LoadResult, store: ConfigStore) -> MainWindow:
    return MainWindow(services, store, loaded.config, loaded.message)


def run_gui(argv: Sequence[str] | None = None, services: AppServices | None = None) -> int:
    app = QApplication.instance() or QApplication(list(argv) if argv is not None else sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("FaceCast")
    app.setOrganizationName("FaceCast")
    apply_dark_theme(app)
    services = services or AppServices.from_environment()
    store = ConfigStore(services.config_path)
    loaded = store.load()
    config = ask_consent(loaded.config, store)
    if config is None:
        return 1
    window = create_window(services, replace(loaded, config=config), store)
    window.show()
    freeze_startup_heap()
    previous_handlers = close_on_signals(window)
    previous_hook = sys.excepthook
    sys.excepthook = lambda kind, exc, tb: report_unhandled(window, kind, exc, tb)
    code = 0
    try:
        try:
            code = app.exec()
        finally:
            sys.excepthook = previous_hook
            # Once the window is gone, a signal must act as usual again (shutdown may still be
            # joining threads: a `kill` that only scheduled a close on a dead loop did nothing).
            for sig, handler in previous_handlers.items():
                # None: a handler installed from C, which Python cannot put back; the default then.
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        finished = window.controller.loads_finished(LOAD_WAIT_AT_EXIT_S)
    except KeyboardInterrupt:  # Ctrl+C while waiting: leave now, the same way, as interrupted
        finished, code = False, 130
    if not finished:
        # A model load (a TensorRT build can take minutes) is still inside ONNX Runtime. Everything
        # that matters is saved and closed by now; exiting normally would tear the interpreter down
        # under it and die in native code, so leave at once.
        log.warning("A model load was still running at exit; leaving without waiting for it.")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def close_on_signals(window: QWidget) -> dict[int, Any]:
    """Ctrl+C in the terminal, `kill` and a closed terminal (Linux, macOS) close the window as its
    close button does: the run stops, a recording is finalised, the settings are saved. (Unhandled,
    Ctrl+C aborted the process from inside a Qt slot and lost both; while idle it did nothing.)
    A signal the user chose to ignore (SIGHUP under `nohup`) stays ignored. Returns the handlers
    replaced, to put back afterwards."""

    def request_close(_signum: int, _frame: object) -> None:
        QTimer.singleShot(0, window.close)  # in the event loop, not inside whatever was running

    replaced: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) == signal.SIG_IGN:
            continue
        replaced[sig] = signal.signal(sig, request_close)
    # Python runs signal handlers only between bytecodes, and an idle Qt loop runs none: a timer
    # gives it a moment five times a second.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(200)
    return replaced


def report_unhandled(
    window: MainWindow, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    """An error escaping a Qt slot: PyQt6 aborts the whole app unless a hook takes it. Logged with
    its traceback and shown as a message; the window keeps running."""
    log.error("Unhandled error in the window", exc_info=(kind, exc, tb))
    if issubclass(kind, KeyboardInterrupt):
        QTimer.singleShot(0, window.close)
        return
    try:
        window.messages.show_message("error", f"Internal error: {kind.__name__}: {exc} (the log has details)")
    except Exception:  # the window itself may be what is broken: the log has it already
        log.exception("Could not show the error in the window")


def freeze_startup_heap() -> None:
    """Move everything allocated at start-up (Qt, numpy, ONNX Runtime, ...) out of the garbage
    collector's reach. A full collection holds the GIL — stalling the pipeline and the window alike —
    for as long as it takes to scan the heap (~50-200 ms here); after this it scans only newer objects."""
    gc.collect()
    gc.freeze()
