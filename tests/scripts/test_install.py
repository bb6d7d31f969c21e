"""scripts/install.py: the plan of pip commands (CPU, CUDA, dev), the ONNX Runtime repair, the
errors a user sees, and (opt-in, slow) a real install into a fresh virtual environment."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
SCRIPT = ROOT / "scripts" / "install.py"


def _load_installer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("facecast_install", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


install = _load_installer()
ORT_PIN = install.read_pin(ROOT / "requirements.txt", "onnxruntime-gpu")
GPU_ONLY = {"onnxruntime-gpu": ORT_PIN}


class FakeRunner:
    """Records commands instead of running them; answers the installer's questions."""

    def __init__(
        self, ort_answers: list[dict[str, str]] | None = None, fail: str = "", output: str = ""
    ) -> None:
        self.ort_answers = list(ort_answers or [GPU_ONLY])
        self.fail = fail  # a word; a streamed command containing it fails with `output`
        self.output = output
        self.streamed: list[tuple[str, ...]] = []
        self.captured: list[tuple[str, ...]] = []

    def stream(self, step: Any, cwd: Path | None = None) -> int:
        self.streamed.append(step.argv)
        if "venv" in step.argv[1:3]:
            python = install.venv_python(Path(step.argv[-1]))
            python.parent.mkdir(parents=True)
            python.touch()
        if self.fail and self.fail in step.argv:
            raise install.InstallError(install.explain_failure(step, 1, self.output))
        return 0

    def capture(self, argv: tuple[str, ...], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.captured.append(argv)
        if argv[-1] == "-L":
            return subprocess.CompletedProcess(argv, 0, "GPU 0: NVIDIA H200 (UUID: GPU-1234)\n", "")
        if "importlib.metadata" in argv[-1]:
            answer = self.ort_answers.pop(0) if len(self.ort_answers) > 1 else self.ort_answers[0]
            return subprocess.CompletedProcess(argv, 0, "".join(f"{d} {v}\n" for d, v in answer.items()), "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def pip_calls(self) -> list[tuple[str, ...]]:
        """The pip arguments of each streamed pip command (without `python -m pip`)."""
        return [argv[3:] for argv in self.streamed if argv[1:3] == ("-m", "pip")]


def _options(tmp_path: Path, accelerator: str = "auto", dev: bool = False, no_venv: bool = False) -> Any:
    return install.Options(venv=tmp_path / "venv", accelerator=accelerator, dev=dev, no_venv=no_venv)


@pytest.fixture
def no_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: None)


@pytest.fixture
def nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.shutil, "which", lambda name: f"/usr/bin/{name}")


def _req(name: str) -> str:
    return str(ROOT / name)


# ------------------------------------------------------------------------------------------------
# Plan


def test_onnxruntime_version_is_read_from_requirements(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "# comment\nnumpy==2.0\n"
        'onnxruntime-gpu==9.8.7; sys_platform == "linux"  # the GPU build\n'
        "Onnxruntime == 9.8.6 ; sys_platform == 'darwin'\n"
    )
    assert install.read_pin(requirements, "onnxruntime-gpu") == "9.8.7"
    assert install.read_pin(requirements, "onnxruntime") == "9.8.6"
    with pytest.raises(install.InstallError, match="no pinned version for insightface"):
        install.read_pin(requirements, "insightface")
    # The real file pins both builds to the same release.
    assert install.read_pin(ROOT / "requirements.txt", "onnxruntime") == ORT_PIN


def test_cpu_install_on_linux_without_a_gpu(tmp_path: Path, no_nvidia_smi: None) -> None:
    runner = FakeRunner()

    install.install(_options(tmp_path), runner, platform_name="linux", machine="x86_64")

    venv_python = str(install.venv_python(tmp_path / "venv"))
    assert runner.streamed[0] == (sys.executable, "-m", "venv", str(tmp_path / "venv"))
    assert all(argv[0] == venv_python for argv in runner.streamed[1:])
    pip_calls = runner.pip_calls()
    assert pip_calls[:2] == [
        ("install", "--upgrade", "pip"),  # a new environment gets a current pip
        ("install", "--require-hashes", "--no-deps", "-r", _req("requirements.lock")),
    ]
    assert not any("requirements-cuda.lock" in " ".join(call) for call in pip_calls)
    assert not any("uninstall" in call for call in pip_calls)
    assert (venv_python, "-c", install.IMPORT_CHECK) in runner.captured


def test_cuda_install_adds_the_cuda_lock_in_the_same_hash_checked_command(
    tmp_path: Path, nvidia_smi: None
) -> None:
    runner = FakeRunner()

    install.install(_options(tmp_path, dev=True), runner, platform_name="linux", machine="x86_64")

    locks = ("requirements.lock", "requirements-cuda.lock", "requirements-dev.lock")
    files = tuple(part for name in locks for part in ("-r", _req(name)))
    assert runner.pip_calls()[-1] == ("install", "--require-hashes", "--no-deps", *files)
    assert ("/usr/bin/nvidia-smi", "-L") in runner.captured


def test_cpu_flag_skips_cuda_even_with_a_gpu(tmp_path: Path, nvidia_smi: None) -> None:
    runner = FakeRunner()
    install.install(_options(tmp_path, accelerator="cpu"), runner, platform_name="win32", machine="AMD64")
    assert not any("requirements-cuda.lock" in " ".join(call) for call in runner.pip_calls())
    assert ("/usr/bin/nvidia-smi", "-L") not in runner.captured


def test_no_cuda_on_macos_even_with_nvidia_smi_and_cuda_flag_is_an_error(
    tmp_path: Path, nvidia_smi: None
) -> None:
    runner = FakeRunner(ort_answers=[{"onnxruntime": ORT_PIN}])
    install.install(_options(tmp_path), runner, platform_name="darwin", machine="arm64")
    assert not any("requirements-cuda.lock" in " ".join(call) for call in runner.pip_calls())

    with pytest.raises(install.InstallError, match="Linux x86_64 and Windows x64 only"):
        install.install(
            _options(tmp_path, accelerator="cuda"), FakeRunner(), platform_name="darwin", machine="arm64"
        )


def test_second_run_creates_nothing_and_does_not_touch_pip(tmp_path: Path, no_nvidia_smi: None) -> None:
    install.install(_options(tmp_path), FakeRunner(), platform_name="linux", machine="x86_64")
    again = FakeRunner()

    install.install(_options(tmp_path), again, platform_name="linux", machine="x86_64")

    assert not any("venv" in argv[1:3] for argv in again.streamed)
    assert ("install", "--upgrade", "pip") not in again.pip_calls()


def test_no_venv_installs_into_the_running_python(tmp_path: Path, no_nvidia_smi: None) -> None:
    runner = FakeRunner()
    install.install(_options(tmp_path, no_venv=True), runner, platform_name="linux", machine="x86_64")
    assert {argv[0] for argv in runner.streamed} == {sys.executable}
    assert not (tmp_path / "venv").exists()


# ------------------------------------------------------------------------------------------------
# ONNX Runtime repair


def test_both_onnxruntime_builds_are_removed_and_the_right_one_reinstalled(
    tmp_path: Path, no_nvidia_smi: None
) -> None:
    both = {"onnxruntime": ORT_PIN, "onnxruntime-gpu": ORT_PIN}
    runner = FakeRunner(ort_answers=[both, GPU_ONLY])

    install.install(_options(tmp_path), runner, platform_name="linux", machine="x86_64")

    pip_calls = runner.pip_calls()
    uninstall = ("uninstall", "-y", "onnxruntime", "onnxruntime-gpu")
    at = pip_calls.index(uninstall)
    assert pip_calls[at + 1][:4] == ("install", "--no-deps", "--require-hashes", "-r")
    assert at > pip_calls.index(("install", "--require-hashes", "--no-deps", "-r", _req("requirements.lock")))


def test_repair_plan(tmp_path: Path) -> None:
    plan = install.plan_ort_repair
    pin = tmp_path / "pin.txt"
    assert plan("py", {"onnxruntime-gpu": "1.0"}, "onnxruntime-gpu", "1.0", pin) == []
    assert [s.argv for s in plan("py", {}, "onnxruntime", "1.0", pin)] == [
        ("py", "-m", "pip", "install", "--no-deps", "--require-hashes", "-r", str(pin))
    ]
    wrong = plan("py", {"onnxruntime": "1.0"}, "onnxruntime-gpu", "1.0", pin)
    assert [s.argv[3:] for s in wrong] == [
        ("uninstall", "-y", "onnxruntime", "onnxruntime-gpu"),
        ("install", "--no-deps", "--require-hashes", "-r", str(pin)),
    ]


def test_the_repair_pin_is_the_locks_entry_with_its_hashes() -> None:
    entry = install.lock_entry(ROOT / "requirements.lock", "onnxruntime-gpu")
    lines = entry.splitlines()
    assert lines[0].startswith(f"onnxruntime-gpu=={ORT_PIN} ;")
    assert all(line.strip().startswith("--hash=sha256:") for line in lines[1:]) and len(lines) > 2
    assert not entry.rstrip().endswith("\\") and "# via" not in entry


def test_every_lock_pins_every_package_with_hashes_and_no_plain_onnxruntime_on_cuda_platforms() -> None:
    for name in ("requirements.lock", "requirements-cuda.lock", "requirements-dev.lock"):
        text = (ROOT / name).read_text(encoding="utf-8")
        pins = [line for line in text.splitlines() if line and not line[0].isspace() and line[0] != "#"]
        assert pins, name
        for line in pins:
            assert "==" in line and line.rstrip().endswith("\\"), (name, line)
        assert "opencv-python==" not in text, name  # overridden: the headless build only
    runtime = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert "scikit-image" not in runtime and "insightface" not in runtime
    plain = next(line for line in runtime.splitlines() if line.startswith("onnxruntime=="))
    assert "sys_platform == 'linux'" in plain  # marker-limited: never beside onnxruntime-gpu
    cuda = (ROOT / "requirements-cuda.lock").read_text(encoding="utf-8")
    assert "nvidia-cudnn-cu13==" in cuda and "onnxruntime-gpu==" not in cuda


def test_the_launcher_runs_main_py_with_the_environments_python(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    posix = install.write_launcher(str(python), ROOT, "linux")
    assert posix.name == "facecast" and os.access(posix, os.X_OK)
    assert posix.read_text().splitlines()[-1] == f'exec {python} {ROOT / "main.py"} "$@"'
    windows = install.write_launcher(str(python), ROOT, "win32")
    assert windows.read_bytes().decode() == f'@"{python}" "{ROOT / "main.py"}" %*\r\n'
    assert not list(tmp_path.rglob("*.part"))


def test_a_repair_that_does_not_take_is_an_error(tmp_path: Path, no_nvidia_smi: None) -> None:
    both = {"onnxruntime": ORT_PIN, "onnxruntime-gpu": ORT_PIN}
    with pytest.raises(install.InstallError, match="still wrong after the repair"):
        install.install(_options(tmp_path), FakeRunner([both]), platform_name="linux", machine="x86_64")


# ------------------------------------------------------------------------------------------------
# What the user sees


def test_no_network_is_one_clear_line(
    tmp_path: Path, no_nvidia_smi: None, capsys: pytest.CaptureFixture[str]
) -> None:
    output = (
        "WARNING: Retrying (Retry(total=0...)) after connection broken by 'NewConnectionError('<pip._vendor"
        ".urllib3.connection.HTTPSConnection object>: Failed to establish a new connection: [Errno -3] "
        "Temporary failure in name resolution')': /simple/numpy/\n"
        "ERROR: Could not find a version that satisfies the requirement numpy==2.4.6\n"
    )
    runner = FakeRunner(fail="-r", output=output)

    code = install.main(["--venv", str(tmp_path / "venv")], runner=runner)

    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: no network: pip could not reach the package index while running `")
    assert "-m pip install --require-hashes --no-deps -r" in err[0]


def test_pip_failure_shows_the_command_and_pips_error() -> None:
    step = install.Step("x", ("py", "-m", "pip", "install", "-r", "requirements.txt"))
    message = install.explain_failure(step, 1, "Collecting av\nERROR: Failed building wheel for av\n")
    assert (
        message == "`py -m pip install -r requirements.txt` failed (exit status 1): "
        "ERROR: Failed building wheel for av"
    )


def test_real_runner_reports_a_failing_command(capsys: pytest.CaptureFixture[str]) -> None:
    step = install.Step(
        "fail on purpose", (sys.executable, "-c", "print('ERROR: boom'); raise SystemExit(3)")
    )
    with pytest.raises(install.InstallError, match=r"failed \(exit status 3\): ERROR: boom"):
        install.Runner().stream(step)
    assert "    ERROR: boom" in capsys.readouterr().out  # the output was shown live


def test_python_too_old_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 9, 18, "final", 0))
    runner = FakeRunner()

    assert install.main([], runner=runner) == 1

    assert runner.streamed == [] and runner.captured == []
    err = capsys.readouterr().err
    assert "needs Python 3.11 or newer; this is 3.9.18" in err


def test_script_parses_on_old_pythons_so_they_get_the_message() -> None:
    ast.parse(SCRIPT.read_text(), feature_version=(3, 7))


def test_script_uses_only_the_standard_library() -> None:
    tree = ast.parse(SCRIPT.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_providers_are_shown_by_main_py_doctor_or_the_inline_check(tmp_path: Path) -> None:
    runner = FakeRunner()
    install.show_providers(runner, "py", tmp_path)
    (tmp_path / "main.py").touch()
    install.show_providers(runner, "py", tmp_path)
    assert runner.streamed == [
        ("py", "-c", install._PROVIDER_CHECK),
        ("py", "main.py", "doctor", "--no-cameras"),
    ]


def test_inline_provider_check_runs_and_names_the_cpu_provider() -> None:
    result = subprocess.run(
        [sys.executable, "-c", install._PROVIDER_CHECK], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Working ONNX Runtime providers: ")
    assert "CPUExecutionProvider" in result.stdout.splitlines()[0]


def test_next_steps_show_commands_relative_to_the_project() -> None:
    python = str(install.venv_python(ROOT / ".venv", "linux"))
    lines = install.next_steps(python, ROOT, dev=True, platform_name="linux")
    assert "  Run the app:     .venv/bin/python main.py" in lines
    assert "  Run the tests:   .venv/bin/python -m pytest" in lines
    windows = install.next_steps(str(install.venv_python(ROOT / ".venv", "win32")), ROOT, False, "win32")
    assert any(line.endswith(f"{Path('.venv', 'Scripts', 'python')} main.py") for line in windows)


# ------------------------------------------------------------------------------------------------
# The real thing (downloads from PyPI; minutes)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    os.environ.get("FACECAST_TEST_INSTALL") != "1", reason="set FACECAST_TEST_INSTALL=1 to run"
)
def test_real_install_into_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--venv", str(venv), "--cpu"], cwd=tmp_path, check=False
    )
    assert result.returncode == 0

    python = str(install.venv_python(venv))
    subprocess.run([python, "-c", "import onnxruntime"], check=True)
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    builds = [
        line for line in listed.splitlines() if line.split("==")[0] in ("onnxruntime", "onnxruntime-gpu")
    ]
    assert len(builds) == 1, builds


@pytest.mark.parametrize(
    ("platform_name", "machine", "mac", "libc", "message"),
    [
        ("darwin", "x86_64", "13.6", ("", ""), "Intel Macs are not supported"),
        ("darwin", "arm64", "13.6.1", ("", ""), "macOS 13.6.1 is too old"),
        ("win32", "ARM64", "", ("", ""), "Windows on ARM is not supported"),
        ("linux", "x86_64", "", ("glibc", "2.31"), "glibc 2.31 is too old"),
        ("linux", "aarch64", "", ("glibc", "2.35"), "glibc 2.35 is too old"),
        ("linux", "x86_64", "", ("musl", "1.2"), "not glibc"),
    ],
)
def test_platforms_the_wheels_do_not_cover_are_refused_with_what_is_needed(
    platform_name: str, machine: str, mac: str, libc: tuple[str, str], message: str
) -> None:
    # Without this, pip falls back to source builds and fails with "qmake" or "no matching distribution".
    with pytest.raises(install.InstallError, match=message):
        install.check_platform(platform_name, machine, mac, libc)


@pytest.mark.parametrize(
    ("platform_name", "machine", "mac", "libc"),
    [
        ("darwin", "arm64", "14.5", ("", "")),
        ("win32", "AMD64", "", ("", "")),
        ("linux", "x86_64", "", ("glibc", "2.36")),
        ("linux", "aarch64", "", ("glibc", "2.39")),
    ],
)
def test_supported_platforms_pass_the_check(
    platform_name: str, machine: str, mac: str, libc: tuple[str, str]
) -> None:
    install.check_platform(platform_name, machine, mac, libc)


def test_a_venv_left_without_pip_is_created_again(tmp_path: Path) -> None:
    """Debian without python3-venv leaves .venv/bin/python but no pip; after the user installs
    the package, running the installer again must repair it, as the README promises."""
    venv = tmp_path / ".venv"
    python = install.venv_python(venv)
    python.parent.mkdir(parents=True)
    python.touch()

    class NoPip(FakeRunner):
        def capture(self, argv: tuple[str, ...], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
            if argv[1:] == ("-m", "pip", "--version"):
                self.captured.append(argv)
                return subprocess.CompletedProcess(argv, 1, "", "No module named pip")
            return super().capture(argv, cwd)

        def stream(self, step: Any, cwd: Path | None = None) -> int:
            self.streamed.append(step.argv)  # --clear keeps the folder: nothing to create here
            return 0

    runner = NoPip()
    options = install.Options(venv=venv, accelerator="cpu", dev=False, no_venv=False)
    assert install.ensure_python(options, runner) == (str(python), True)  # pip gets upgraded then
    assert runner.streamed == [(sys.executable, "-m", "venv", "--clear", str(venv))]


def test_a_failed_source_build_says_why() -> None:
    step = install.Step("install", ("python", "-m", "pip", "install", "PyQt6"))
    output = "Building wheel...\nerror: metadata-generation-failed\n"
    assert "metadata-generation-failed" in install.explain_failure(step, 1, output)
