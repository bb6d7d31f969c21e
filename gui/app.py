"""`python main.py` with no subcommand: the control panel."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Sequence
from dataclasses import replace

from PyQt6.QtWidgets import QApplication, QDialog

from gui.config import ConfigStore, GuiConfig, LoadResult
from gui.consent import ConsentDialog
from gui.main_window import MainWindow
from gui.services import AppServices
from gui.theme import apply_dark_theme


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
    return app.exec()


def freeze_startup_heap() -> None:
    """Move everything allocated at start-up (Qt, numpy, ONNX Runtime, ...) out of the garbage
    collector's reach. A full collection holds the GIL — stalling the pipeline and the window alike —
    for as long as it takes to scan the heap (~50-200 ms here); after this it scans only newer objects."""
    gc.collect()
    gc.freeze()
