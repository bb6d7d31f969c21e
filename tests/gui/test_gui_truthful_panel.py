"""The panel shows what is true: the Original pane carries the input, never the processed frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PyQt6.QtCore import Qt
from pytestqt.qtbot import QtBot

from gui.controller import RunState
from gui.graph import FpsLatencyGraph
from gui.main_window import MainWindow
from gui.preview import PreviewFrame, PreviewWidget
from tests.gui.test_gui_helpers import open_window, run_config


def _grab_panes(qtbot: QtBot, window: MainWindow, frames: int) -> list[tuple[np.ndarray | None, np.ndarray]]:
    """(Original pane's picture, output) for each of the next `frames` frames shown after Start."""
    grabbed: list[tuple[np.ndarray | None, np.ndarray]] = []

    def grab() -> None:  # queued after the window's own slot: the frame is on screen
        shown = window.preview.last_frame
        if shown is None:
            return
        panes = dict(window.preview.panes())
        grabbed.append((panes["Original"], shown.output))

    window._feed.frame_ready.connect(grab, Qt.ConnectionType.QueuedConnection)  # type: ignore[call-arg]
    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(grabbed) >= frames, timeout=20_000)
    window._feed.frame_ready.disconnect(grab)
    qtbot.mouseClick(window.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.controller.state == RunState.IDLE, timeout=5_000)
    return grabbed


def test_the_original_pane_never_shows_the_labelled_output_right_after_start_or_a_restart(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    # No face: the output is the input plus the disclosure label, so an Original pane equal to the
    # output is the processed frame shown as the original.
    window = open_window(qtbot, tmp_path, models_dir, run_config((), vcam=False, disclosure_label=True))
    assert window.preview.mode == "side_by_side"
    for run in ("first Start", "second Start"):
        grabbed = _grab_panes(qtbot, window, 30)
        wrong = [
            i
            for i, (original, output) in enumerate(grabbed)
            if original is None or np.array_equal(original, output)
        ]
        assert wrong == [], f"{run}: frames {wrong} show no input or the labelled output as Original"
        original, output = grabbed[-1]
        assert original is not None and original.shape == output.shape


def test_a_frame_whose_original_copy_was_dropped_keeps_the_last_input_in_the_original_pane(
    qtbot: QtBot,
) -> None:
    # A stall longer than the copies kept (a model warming up) leaves a frame without its original.
    preview = PreviewWidget()
    qtbot.addWidget(preview)
    first_input = np.full((48, 64, 3), 30, np.uint8)
    preview.show_frame(PreviewFrame(np.full((48, 64, 3), 200, np.uint8), first_input, 0))
    later_output = np.full((48, 64, 3), 220, np.uint8)
    preview.show_frame(PreviewFrame(later_output, None, 1))
    panes = dict(preview.panes())
    assert panes["Original"] is first_input and panes["Output"] is later_output
    preview.set_mode("original")
    assert preview.panes()[0][1] is first_input
    preview.set_mode("side_by_side")
    preview.clear()  # Stop: nothing of the last run is left to show
    preview.show_frame(PreviewFrame(later_output, None, 2))
    assert dict(preview.panes())["Original"] is None


def test_the_graph_writes_its_scale_which_grows_with_the_values(qtbot: QtBot) -> None:
    graph = FpsLatencyGraph()
    qtbot.addWidget(graph)
    assert graph.scale_labels() == ("30 fps", "100 ms")
    graph.add_sample(60.0, 200.0)
    assert graph.scale_labels() == ("69 fps", "230 ms")  # the top line sits 15% above the highest value
    graph.grab()  # paints with the labels
