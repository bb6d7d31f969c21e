"""The live numbers at the status bar's right: fps, latency, dropped frames, the privacy fallback's
faces and what the stages run on, each with a tooltip that says what it means."""

from __future__ import annotations

from PyQt6.QtWidgets import QLabel, QStatusBar

from realtime.api import StatsSnapshot

FPS_HELP = "Frames per second that reach the outputs (the preview, the virtual camera, the recording)."
LATENCY_HELP = (
    "Glass-to-glass latency: from the moment a frame is captured to the moment it is sent out, "
    "median (p50) and the slowest 1 % (p99). Set the audio delay in your call app to the p99."
)
DROPPED_HELP = (
    "Frames dropped to stay live: when the face stages fall behind the input, the frame waiting\n"
    "longest is skipped so the output never lags further behind. A few now and then are harmless;\n"
    "a count that keeps climbing means a lighter preset (Stages) or a smaller input size."
)
FALLBACK_HELP = "Faces shown by the privacy fallback (Stages > Privacy) while FaceCast re-acquires them."


class LiveNumbers:
    def __init__(self) -> None:
        self.fps_label = QLabel()
        self.latency_label = QLabel()
        self.dropped_label = QLabel()
        self.fallback_label = QLabel()  # which faces are in the privacy fallback, and why
        self.stages_label = QLabel()
        for label, text in (
            (self.fps_label, FPS_HELP),
            (self.latency_label, LATENCY_HELP),
            (self.dropped_label, DROPPED_HELP),
            (self.fallback_label, FALLBACK_HELP),
        ):
            label.setToolTip(text)
        self.clear()

    def add_to(self, status: QStatusBar) -> None:
        for label in (self.fps_label, self.latency_label, self.dropped_label):
            label.setMinimumWidth(90)
            status.addPermanentWidget(label)
        status.addPermanentWidget(self.fallback_label)
        status.addPermanentWidget(self.stages_label)

    def clear(self) -> None:
        """No run: dashes, not the last run's figures."""
        self.fps_label.setText("– fps")
        self.latency_label.setText("latency –")
        self.dropped_label.setText("dropped –")
        self.fallback_label.setText("")
        self.stages_label.setText("")

    def show(self, stats: StatsSnapshot, stages: str) -> None:
        lat = stats.latency_ms
        self.fps_label.setText(f"{stats.fps_out:.1f} fps")
        self.latency_label.setText(f"latency p50 {lat.p50:.0f} / p99 {lat.p99:.0f} ms")
        self.dropped_label.setText(f"dropped {stats.frames_dropped}")
        self.fallback_label.setText(stats.fallback_text())
        self.stages_label.setText(stages)
