"""FaceCast: real-time face swap to a virtual camera.

python main.py                      open the control panel (GUI)
python main.py run --source ME.jpg --input 0 --output vcam
python main.py models list | download NAME | verify | path | doubles DIR
python main.py doctor               what works on this machine, and how to fix what doesn't
python main.py bench                FaceCast's engine against the naive loop
"""

from __future__ import annotations

import os
import signal

if __name__ == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    # Ctrl+C while the modules below import: nothing is open yet, so exit 130 at once, without the
    # KeyboardInterrupt traceback Python's own handler prints. Put back before main() runs. (An
    # ignored SIGINT, as in a script's background job, stays ignored.)
    signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(130))

import argparse
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import platformdirs

from models.errors import ExitCode, FaceCastError
from realtime.core.failures import told
from realtime.tools.cli import cmd_bench, cmd_doctor, cmd_models, cmd_serve, cmd_verify
from realtime.tools.cli_args import build_parser
from realtime.tools.cli_jobs import cmd_bench_jobs, cmd_jobs, cmd_worker
from realtime.tools.cli_run import check_display, cmd_run

log = logging.getLogger("facecast")

if TYPE_CHECKING:  # the CLI imports the engine lazily, so that `--help` stays instant
    from realtime.core.contracts import FrameSink
    from realtime.core.engine import Engine
    from realtime.lifecycle.signals import StopSignals

# Our BLAS work is a handful of tiny matrices per face; OpenBLAS's thread pools (numpy's and
# scipy's) only spin on sched_yield between calls and take cores from the pipeline's threads.
# Set before anything imports numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The compiled pixel loops (models/ops/pixel_kernels.py) keep their machine code in the user's cache
# folder, not next to the code: an install folder may be read-only (a system-wide install), and
# Numba fails the import when it has nowhere to write. A user's own setting wins.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(platformdirs.user_cache_dir("FaceCast")) / "numba"))


class QtWindowOutput:
    """`run --output window`: the GUI layer's preview window (only the entry point imports the GUI)."""

    def __init__(self) -> None:
        self._app: Any = None  # the QApplication, kept alive for the run

    def make_sink(self) -> FrameSink:
        from gui.window_sink import WindowSink

        return WindowSink(title="FaceCast")

    def prepare(self, sink: FrameSink) -> None:
        from PyQt6.QtWidgets import QApplication

        from gui.window_sink import WindowSink

        self._app = QApplication.instance() or QApplication(sys.argv[:1])
        assert isinstance(sink, WindowSink)
        sink.ensure_window()  # on the GUI thread, before the engine opens the sink

    def run_loop(
        self,
        engine: Engine,
        sink: FrameSink,
        show_stats: bool,
        show: Callable[[str], None],
        signals: StopSignals,
    ) -> None:
        """Run Qt's event loop until the window is closed, the engine finishes or a signal asks to stop."""
        from PyQt6.QtCore import QTimer
        from PyQt6.QtWidgets import QApplication

        from gui.window_sink import WindowSink

        assert isinstance(sink, WindowSink)
        app = QApplication.instance()
        assert app is not None, "create the QApplication before the window sink"
        if signals.requested:
            return  # asked to stop while starting: Qt ignores quit() before exec()
        # The loop ends through poll() below (a closed window sets `sink.closed`). Qt's own quit on the
        # last window closed fired again when the run closed the window after exec() had returned,
        # and left every later event loop of the process exiting at once.
        QApplication.setQuitOnLastWindowClosed(False)
        timer = QTimer()

        def poll() -> None:  # also gives Python the control it needs to run signal handlers
            if sink.closed.is_set() or not engine.running or signals.requested:
                app.quit()

        timer.timeout.connect(poll)
        timer.start(100)
        stats_timer = QTimer()
        if show_stats:
            stats_timer.timeout.connect(lambda: show(engine.stats().format_line()))
            stats_timer.start(1000)
        app.exec()


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    return cmd_run(args, out, QtWindowOutput())


def cmd_gui(args: argparse.Namespace, out: TextIO) -> int:
    check_display(for_gui=True)
    try:
        from gui.app import run_gui
    except ImportError as exc:
        raise FaceCastError(
            f"The control panel is not available ({exc}).",
            hint="Use `python main.py run --help` for the command line.",
        ) from exc
    return run_gui()


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.debug:
        os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    commands: dict[str | None, Callable[[argparse.Namespace, TextIO], int]] = {
        "run": run_command,
        "models": cmd_models,
        "doctor": cmd_doctor,
        "bench": lambda a, o: cmd_bench_jobs(a, o) if a.jobs else cmd_bench(a, o),
        "serve": cmd_serve,
        "jobs": cmd_jobs,
        "worker": cmd_worker,
        "verify": cmd_verify,
        None: cmd_gui,
    }
    try:
        return commands[args.command](args, out)
    except (Exception, KeyboardInterrupt) as exc:  # Ctrl+C before a run's first frame: Stopped's code
        if args.debug and not isinstance(exc, KeyboardInterrupt):
            raise
        failure = told(exc)
        if failure.message:
            print(f"error: {failure.message}", file=sys.stderr)
        return failure.exit_code


def run_main() -> int:
    """The process's exit status: main()'s, or 130 for a Ctrl+C that no command caught."""
    threading.current_thread().name = "main"
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the imports are done
    try:
        return main()
    except KeyboardInterrupt:  # before a command's own handling (while the arguments are parsed)
        return ExitCode.SIGINT


if __name__ == "__main__":
    sys.exit(run_main())
