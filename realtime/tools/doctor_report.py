"""The doctor's report: its checks and sections, and the plain-text form it is printed in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from models.errors import ExitCode

Status = Literal["ok", "warn", "fail", "info"]

SYSTEM = "System"
PACKAGES = "Packages"
ONNX_RUNTIME = "ONNX Runtime"
NVIDIA_GPU = "NVIDIA GPU"
VIRTUAL_CAMERA = "Virtual camera"
CAMERAS = "Cameras"
MODELS = "Models"
SECTION_TITLES = (SYSTEM, PACKAGES, ONNX_RUNTIME, NVIDIA_GPU, VIRTUAL_CAMERA, CAMERAS, MODELS)


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report. `fix` is a command or step the user can act on ('' if none).

    essential: a failure here means FaceCast cannot run at all (it decides the exit code).
    """

    name: str
    status: Status
    detail: str
    fix: str = ""
    essential: bool = False


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True)
class DoctorReport:
    sections: tuple[Section, ...]

    @property
    def checks(self) -> list[Check]:
        return [check for section in self.sections for check in section.checks]

    def section(self, title: str) -> Section:
        for section in self.sections:
            if section.title == title:
                return section
        raise KeyError(f"no section {title!r}; the report has {[s.title for s in self.sections]}")

    @property
    def essential_failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail" and c.essential]

    @property
    def exit_code(self) -> int:
        return ExitCode.CHECK_FAILED if self.essential_failures else ExitCode.OK


@dataclass(frozen=True, slots=True)
class ProviderProbe:
    """Whether one ONNX Runtime execution provider really ran a model.

    reason/fix: why not and what to do ('' when it works). log: ORT's captured output.
    """

    provider: str
    works: bool
    reason: str = ""
    fix: str = ""
    log: str = ""


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """What nvidia-smi said: one line per GPU ('name, driver, memory'), or why it could not."""

    found: bool
    gpus: tuple[str, ...] = ()
    error: str = ""


_STATUS_LABELS: dict[Status, str] = {"ok": "[ OK ]", "warn": "[WARN]", "fail": "[FAIL]", "info": "[INFO]"}


def format_report(report: DoctorReport) -> str:
    """The report as aligned plain text: a status column, a name column, then detail and fix."""
    width = max((len(c.name) for c in report.checks), default=0)
    indent = " " * (2 + 6 + 1 + width + 2)
    counts = {status: sum(c.status == status for c in report.checks) for status in ("warn", "fail")}
    lines = [f"FaceCast doctor: {counts['fail']} failed, {counts['warn']} warnings"]
    for section in report.sections:
        lines += ["", section.title]
        for check in section.checks:
            first, *rest = check.detail.splitlines() or [""]
            lines.append(f"  {_STATUS_LABELS[check.status]} {check.name:<{width}}  {first}".rstrip())
            lines += [indent + line for line in rest]
            if check.fix:
                lines.append(f"{indent}fix: {check.fix}")
    if report.essential_failures:
        names = ", ".join(c.name for c in report.essential_failures)
        lines += ["", f"FaceCast cannot run until these are fixed: {names}"]
    return "\n".join(lines) + "\n"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
