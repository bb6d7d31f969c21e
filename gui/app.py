"""`python main.py` with no subcommand: the control panel."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from PyQt6.QtCore import QTimer
from PyQt6.QtWidgets import QApplication, QDialog, QWidget

from gui.config import ConfigStore, GuiConfig, LoadResult
from gui.consent import ConsentDialog
from gui.log_file import install_log_file
from gui.main_window import MainWindow
from gui.services import AppServices
from gui.theme import apply_dark_theme
from realtime.api import ExitCode, consent_path, consent_recorded, freeze_heap, record_consent

log = logging.getLogger(__name__)

LOAD_WAIT_AT_EXIT_S = 10.0
DECLINED_CODE = ExitCode.CHECK_FAILED  # the user quit at the consent dialog
SIGNAL_CODE = ExitCode.OK  # Ctrl+C, `kill`: the window closes as its close button does, and so exits 0
_CLOSED_BY_SIGNAL = 2  # a dialog result beside Rejected (0) and Accepted (1)


def ask_consent(config: GuiConfig, store: ConfigStore) -> GuiConfig | int:
    """The first-run dialog; the answer is stored so it is asked once. An int: the user declined or
    a signal (Ctrl+C in the terminal) closed the dialog, and the app exits with that code."""
    # One confirmation for the panel and the command line: the shared file beside the settings.
    shared = consent_path(store.path)
    if config.consent_accepted or consent_recorded(shared):
        if not consent_recorded(shared):
            _store_consent(shared)  # accepted by an older panel: the command line sees it now
        return config if config.consent_accepted else replace(config, consent_accepted=True)
    dialog = ConsentDialog()
    # The dialog runs its own event loop before the window's handlers exist: without these,
    # Ctrl+C is ignored (Python never gets to run its handler) and only SIGKILL ends the app.
    previous = close_on_signals(dialog, lambda: dialog.done(_CLOSED_BY_SIGNAL))
    try:
        answer = dialog.exec()
    finally:
        restore_signals(previous)
    if answer == _CLOSED_BY_SIGNAL:
        return SIGNAL_CODE
    if answer != QDialog.DialogCode.Accepted:
        return DECLINED_CODE
    config = replace(config, consent_accepted=True)
    _store_consent(shared)
    with contextlib.suppress(OSError):  # saved again on exit, where a failure is reported
        store.save(config)
    return config


def _store_consent(path: Path) -> None:
    try:
        record_consent(path)
    except OSError as exc:  # the settings file keeps it for the panel; the command line asks again
        log.warning("could not store the consent confirmation in %s: %s", path, exc)


def create_window(services: AppServices, loaded: LoadResult, store: ConfigStore) -> MainWindow:
    return MainWindow(services, store, loaded.config, loaded.message)


def run_gui(argv: Sequence[str] | None = None, services: AppServices | None = None) -> int:
    app = QApplication.instance() or QApplication(list(argv) if argv is not None else sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("FaceCast")
    app.setOrganizationName("FaceCast")
    apply_dark_theme(app)
    services = services or AppServices.from_environment()
    if services.log_path is None:
        services = replace(services, log_path=install_log_file(services.log_dir))
    log.info("FaceCast control panel starting")
    store = ConfigStore(services.config_path)
    loaded = store.load()
    config = ask_consent(loaded.config, store)
    if isinstance(config, int):
        return config
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
            restore_signals(previous_handlers)
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


def close_on_signals(window: QWidget, close: Callable[[], None] | None = None) -> dict[int, Any]:
    """Ctrl+C in the terminal, `kill` and a closed terminal (Linux, macOS) close the window as its
    close button does: the run stops, a recording is finalised, the settings are saved. (Unhandled,
    Ctrl+C aborted the process from inside a Qt slot and lost both; while idle it did nothing.)
    `close`: what closing means instead of window.close (a dialog's done()). A signal the user chose
    to ignore (SIGHUP under `nohup`) stays ignored. Returns the handlers replaced, for
    restore_signals()."""
    action = close or window.close

    def request_close(_signum: int, _frame: object) -> None:
        QTimer.singleShot(0, action)  # in the event loop, not inside whatever was running

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


def restore_signals(replaced: dict[int, Any]) -> None:
    """Put back the handlers close_on_signals() replaced."""
    for sig, handler in replaced.items():
        # None: a handler installed from C, which Python cannot put back; the default then.
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


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
    """Everything allocated at start-up (Qt, numpy, ONNX Runtime, ...) out of the collector's reach
    (realtime/core/heap.py): a full scan stalls the pipeline and the window alike for tens of ms."""
    freeze_heap()
