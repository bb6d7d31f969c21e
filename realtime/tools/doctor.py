"""`doctor`: what works on this machine, what does not, and the command that fixes it.

Every check is independent and guarded: one that crashes is reported as a failing check with its
exception text, and the others still run. Only essential failures (nothing to run the engine on)
make `run_doctor` return non-zero; a missing GPU provider or virtual camera driver is a warning,
because FaceCast still runs on CPU and can show its output in a window or write it to a file.

Run it as `python -m realtime.tools.doctor` (or through the app's CLI).

Why a provider failed, and the capture of ORT's output that says so, are models/runtime/session.py's (the
same explanation the app gives when a session falls back). That module imports onnxruntime, so it is
imported inside the checks that need it: the doctor must still report when onnxruntime is missing.
"""

from __future__ import annotations

import ctypes.util
import os
import platform as platform_module
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TextIO

from models.cli_text import installer_command, shown_path

Status = Literal["ok", "warn", "fail", "info"]

SYSTEM = "System"
PACKAGES = "Packages"
ONNX_RUNTIME = "ONNX Runtime"
NVIDIA_GPU = "NVIDIA GPU"
VIRTUAL_CAMERA = "Virtual camera"
CAMERAS = "Cameras"
MODELS = "Models"
SECTION_TITLES = (SYSTEM, PACKAGES, ONNX_RUNTIME, NVIDIA_GPU, VIRTUAL_CAMERA, CAMERAS, MODELS)

# The ORT names (models.runtime.session has them too, but importing it needs onnxruntime).
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"

# Not compute providers: Azure only forwards to a remote endpoint, so probing it says nothing.
_SKIPPED_PROVIDERS = frozenset({"AzureExecutionProvider"})

_REPO_ROOT = Path(__file__).resolve().parents[2]


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
        return 1 if self.essential_failures else 0


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
    _Package("insightface", ("insightface",), True, "face alignment"),
)

_INSTALL_FIX = installer_command()


# --------------------------------------------------------------------------------------------
# Public entry points


def collect_report(
    check_cameras: bool = True,
    check_vcam: bool = True,
    *,
    platform: str = sys.platform,
    models_dir: Path | None = None,
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
    sections.append(Section(MODELS, _guarded("Models", lambda: _check_models(models_dir))))
    return DoctorReport(tuple(sections))


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


def run_doctor(
    out: TextIO, check_cameras: bool = True, check_vcam: bool = True, models_dir: Path | None = None
) -> int:
    """Print the report to `out`; 0 unless something essential failed."""
    report = collect_report(check_cameras=check_cameras, check_vcam=check_vcam, models_dir=models_dir)
    out.write(format_report(report))
    out.flush()
    return report.exit_code


def probe_providers(cuda_preload: bool = True) -> list[ProviderProbe]:
    """Open a tiny model with each available ONNX Runtime provider (alone, plus CPU as fallback),
    run it once and report whether that provider really ran it.

    ORT does not raise when a GPU provider cannot load: it logs why and runs on CPU, and
    get_available_providers() lists what the wheel was *built* with. So the truth is
    `sess.get_providers()[0]` after creation, and the reason is in ORT's log on stderr.
    """
    import numpy as np
    import onnxruntime as ort

    from models.runtime.session import prepare_gpu_libraries

    model = _tiny_model()
    # 2 = warning, ORT's own default: the "why it fell back" lines are logged at W and E by the
    # default logger. Set explicitly in case something raised it to silence ORT.
    ort.set_default_logger_severity(2)
    a = np.array([[1.0, 2.0]], dtype=np.float32)
    b = np.array([[3.0, 4.0]], dtype=np.float32)
    probes: list[ProviderProbe] = []
    for provider in ort.get_available_providers():
        if provider in _SKIPPED_PROVIDERS:
            continue
        # Load pip's CUDA/cuDNN/TensorRT libraries the way the app does (once per process).
        extra_log = prepare_gpu_libraries(provider) if cuda_preload else ""
        probes.append(_probe_provider(ort, provider, model, a, b, extra_log))
    return probes


def explain_probe_failure(provider: str, log: str, active: Sequence[str] = ()) -> tuple[str, str]:
    """(reason, fix) for a provider whose probe did not run on it, as a report sentence ("CUDA
    provider not usable: ..."): models.runtime.session's explanation, with fixes that use this interpreter's
    pip and the onnxruntime version requirements.txt pins."""
    from models.runtime.session import explain_provider_failure, provider_label

    reason, fix = explain_provider_failure(
        provider, log, active=active, pip=_pip_command(), ort_version=_ort_version_for_fix()
    )
    return f"{provider_label(provider)} provider not usable: {reason}", fix


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
    if sys.platform.startswith("linux") and ctypes.util.find_library("xcb-cursor") is None:
        # Qt 6.5+ aborts at start-up without it on X11, saying only that reinstalling may help.
        checks.append(
            Check(
                "Qt window (X11)",
                "warn",
                "libxcb-cursor0 not found: the control panel will not open on X11",
                "sudo apt install libxcb-cursor0 (Fedora: xcb-util-cursor)",
            )
        )
    from realtime.io.display import display_problem

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


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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


# --------------------------------------------------------------------------------------------
# ONNX Runtime


def _expected_ort_distribution(machine: str | None = None, platform: str = sys.platform) -> str:
    """The build requirements.txt installs here: the GPU build where NVIDIA wheels exist."""
    machine = machine or platform_module.machine()
    gpu_wheels = (platform.startswith("linux") and machine == "x86_64") or (
        platform == "win32" and machine.upper() == "AMD64"
    )
    return "onnxruntime-gpu" if gpu_wheels else "onnxruntime"


def _check_ort_distributions() -> list[Check]:
    present = {d: v for d in ("onnxruntime", "onnxruntime-gpu") if (v := _dist_version(d)) is not None}
    expected = _expected_ort_distribution()
    pin = f"{expected}=={_ort_version_for_fix()}"
    pip = _pip_command()
    if len(present) == 2:
        return [
            Check(
                "onnxruntime install",
                "fail",
                f"both onnxruntime {present['onnxruntime']} and onnxruntime-gpu {present['onnxruntime-gpu']} "
                "are installed; they write the same files, so which one runs is an accident",
                _then(f"{pip} uninstall -y onnxruntime onnxruntime-gpu", f"{pip} install {pin}") + "  "
                "(insightface must be installed with --no-deps: its declared 'onnxruntime' dependency "
                f"is what brings the second copy back; {_INSTALL_FIX} does this right)",
                essential=True,
            )
        ]
    if not present:
        return [
            Check("onnxruntime install", "fail", "onnxruntime is not installed", _INSTALL_FIX, essential=True)
        ]
    [(dist, version)] = present.items()
    if dist != expected:
        return [
            Check(
                "onnxruntime install",
                "warn",
                f"{dist} {version} is installed; this platform should use {expected}",
                _then(f"{pip} uninstall -y {dist}", f"{pip} install {pin}"),
            )
        ]
    return [Check("onnxruntime install", "ok", f"{dist} {version}")]


def _check_providers(gpu: GpuInfo) -> list[Check]:
    try:
        probes = probe_providers()
    except ImportError as err:
        # Not a crash to report: a package is missing (also flagged under Packages). Without onnx
        # only this test is lost; without onnxruntime/numpy nothing can run.
        essential = err.name != "onnx"
        status: Status = "fail" if essential else "warn"
        return [Check("Providers", status, f"cannot test them: {err}", _INSTALL_FIX, essential=essential)]
    from models.runtime.session import provider_label

    checks = []
    for probe in probes:
        name = f"{provider_label(probe.provider)} provider"
        # The reason is a whole sentence ("CUDA provider not usable: ..."); the name column
        # already says which provider.
        detail = probe.reason.removeprefix(f"{name} ")
        if probe.works:
            checks.append(Check(name, "ok", f"{probe.provider} ran a test model"))
        elif probe.provider == CPU:
            checks.append(Check(name, "fail", detail, probe.fix or _INSTALL_FIX, essential=True))
        elif probe.provider in (CUDA, TENSORRT) and not gpu.found:
            # Nothing to fix on a machine without an NVIDIA GPU (the GPU build of ORT lists these
            # providers everywhere), so keep it calm; the fix is still there for hidden GPUs.
            fix = f"if this machine has an NVIDIA GPU: {probe.fix}" if probe.fix else ""
            if "no NVIDIA GPU" not in detail:
                detail += " (no NVIDIA GPU found)"
            checks.append(Check(name, "info", detail, fix))
        else:
            # TensorRT is an optional speed-up on top of CUDA; any other accelerator that a GPU
            # machine cannot use is worth a warning.
            checks.append(Check(name, "info" if probe.provider == TENSORRT else "warn", detail, probe.fix))
    working = [p.provider for p in probes if p.works]
    accelerated = [p for p in working if p != CPU]
    if accelerated:
        # What --provider auto (the default) picks; the others are there to be asked for by name.
        from models.runtime.session import ORT_PROVIDER, auto_provider

        picked = ORT_PROVIDER[auto_provider(working, driver=True)]  # CUDA ran: the driver is there
        others = [provider_label(p) for p in accelerated if p != picked]
        detail = (
            f"{provider_label(picked)} (the default, --provider auto)" if picked != CPU else "CPU by default"
        )
        if others:
            detail += f"; also works: {', '.join(others)} (ask for it with --provider)"
        checks.append(Check("Will run on", "ok", detail))
    elif working:
        checks.append(Check("Will run on", "info", "CPU only: face swapping will be slow (a few fps)"))
    else:
        checks.append(
            Check("Will run on", "fail", "no ONNX Runtime provider works", _INSTALL_FIX, essential=True)
        )
    return checks


def _probe_provider(ort: Any, provider: str, model: bytes, a: Any, b: Any, extra_log: str) -> ProviderProbe:
    from models.runtime.session import OutputCapture

    options = ort.SessionOptions()
    options.log_severity_level = 2
    if provider == "DmlExecutionProvider":
        # DirectML supports neither memory patterns nor parallel execution.
        options.enable_mem_pattern = False
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    providers = [provider] if provider == CPU else [provider, CPU]
    active: list[str] = []
    error = ""
    correct = False

    def probe() -> None:
        nonlocal active, correct
        session = ort.InferenceSession(model, sess_options=options, providers=providers)
        active = list(session.get_providers())
        (result,) = session.run(None, {"a": a, "b": b})
        correct = bool((result == a + b).all())

    # ORT's native log (fd 2) and its Python "EP Error" prints say why a provider fell back.
    with OutputCapture() as capture:
        try:
            capture.run(probe)
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
    log = extra_log + capture.text() + (f"\n{error}" if error else "")
    if not error and active and active[0] == provider and correct:
        return ProviderProbe(provider, True, log=log)
    if not error and active and active[0] == provider:
        return ProviderProbe(provider, False, f"{provider} returned a wrong result for 1+3, 2+4", log=log)
    reason, fix = explain_probe_failure(provider, log, active)
    return ProviderProbe(provider, False, reason, fix, log)


def _tiny_model() -> bytes:
    """An ONNX model computing c = a + b on (1, 2) floats: the cheapest graph every provider runs."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in ("a", "b")]
    output = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "doctor", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # An old IR version and opset, so the probe also works with an older ORT than pinned (the case
    # where a doctor is most needed).
    model.ir_version = 8
    return bytes(model.SerializeToString())


# --------------------------------------------------------------------------------------------
# NVIDIA GPU and PyNvVideoCodec


def query_gpu(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> GpuInfo:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuInfo(found=False, error="nvidia-smi not found on PATH")
    try:
        proc = run(
            [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return GpuInfo(found=False, error=f"nvidia-smi did not answer: {err}")
    gpus = tuple(line.strip() for line in proc.stdout.splitlines() if line.strip())
    if proc.returncode != 0 or not gpus:
        why = _first_line(proc.stderr or proc.stdout) or f"exit status {proc.returncode}"
        return GpuInfo(found=False, error=why)
    return GpuInfo(found=True, gpus=gpus)


def _query_gpu_guarded() -> GpuInfo:
    try:
        return query_gpu()
    except Exception as err:
        return GpuInfo(found=False, error=f"{type(err).__name__}: {err}")


def _gpu_checks(gpu: GpuInfo) -> tuple[Check, ...]:
    if not gpu.found:
        if "not found on PATH" in gpu.error:
            return (Check("NVIDIA GPU", "info", "no NVIDIA GPU/driver found"),)
        return (
            Check(
                "NVIDIA GPU",
                "warn",
                f"nvidia-smi failed: {gpu.error}",
                "reinstall or update the NVIDIA driver, then reboot",
            ),
        )
    try:
        from models.runtime.session import MIN_DRIVER, required_cuda
    except ImportError:  # no usable onnxruntime (reported under Packages): no CUDA to need a driver
        cuda_major, min_driver = 0, None
    else:
        cuda_major = required_cuda()[0]
        min_driver = MIN_DRIVER.get(cuda_major)
    checks = []
    for index, line in enumerate(gpu.gpus):
        fields = [f.strip() for f in line.split(",")]
        driver = fields[1].split(".")[0] if len(fields) > 1 else ""
        if min_driver and driver.isdigit() and int(driver) < min_driver:
            checks.append(
                Check(
                    f"GPU {index}",
                    "warn",
                    f"{line}: driver {fields[1]} is older than R{min_driver} (CUDA {cuda_major} needs it)",
                    f"update the NVIDIA driver to {min_driver} or newer",
                )
            )
        else:
            checks.append(Check(f"GPU {index}", "ok", line))
    return tuple(checks)


def _check_pynvvideocodec(gpu: GpuInfo) -> list[Check]:
    try:
        import PyNvVideoCodec
    except ImportError as err:
        why = _first_line(str(err))
        return [Check("PyNvVideoCodec", "info", f"not installed ({why}); GPU video decoding is off")]
    except RuntimeError as err:
        # It dlopens the driver's NVENC library on import and raises RuntimeError without it.
        status: Status = "warn" if gpu.found else "info"
        return [
            Check(
                "PyNvVideoCodec",
                status,
                f"cannot load: {_first_line(str(err))}",
                "needs an NVIDIA driver with video support (in Docker: "
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video)"
                if gpu.found
                else "",
            )
        ]
    version = getattr(PyNvVideoCodec, "__version__", None) or _dist_version("PyNvVideoCodec") or "?"
    return [Check("PyNvVideoCodec", "ok", str(version))]


# --------------------------------------------------------------------------------------------
# Virtual camera and cameras


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


def _check_models(models_dir: Path | None) -> list[Check]:
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


def _pip_command() -> str:
    """`pip` for exactly the interpreter being checked (a bare `pip` may be another Python's)."""
    return f"{shown_path(Path(sys.executable or 'python'))} -m pip"


def _then(*commands: str) -> str:
    """Commands to run one after another: `a && b`, or `a; b` on Windows, whose PowerShell 5.1
    rejects `&&`."""
    return ("; " if sys.platform == "win32" else " && ").join(commands)


def _ort_version_for_fix() -> str:
    """The onnxruntime version requirements.txt pins (so fixes do not repeat the pin), else the
    installed one."""
    requirements = _REPO_ROOT / "requirements.txt"
    try:
        text = requirements.read_text(encoding="utf-8")
    except OSError:
        text = ""
    match = re.search(r"^onnxruntime(?:-gpu)?==([^\s;]+)", text, re.MULTILINE)
    if match:
        return match.group(1)
    return _dist_version("onnxruntime-gpu") or _dist_version("onnxruntime") or "<version>"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


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
