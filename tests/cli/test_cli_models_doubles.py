"""`main.py models doubles DIR`: the contract-exact model doubles, written where a user asks."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort

import main
from models.files.catalogue import entry_for_file
from tests.paths import REPO_ROOT


def test_models_doubles_writes_every_double_and_each_loads(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "doubles"
    assert main.main(["models", "doubles", str(target)], out=out) == 0
    written = sorted(p.name for p in target.iterdir())
    assert "det_10g.onnx" in written and "inswapper_128.onnx" in written
    assert len(out.getvalue().splitlines()) == len(written)
    for name in written:
        entry_for_file(name)  # a catalogue file name: the app finds it where it looks
        session = ort.InferenceSession(str(target / name), providers=["CPUExecutionProvider"])
        assert session.get_inputs()


def test_the_module_writer_still_works_on_its_own(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "models.fakes.doubles", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "w600k_r50.onnx").is_file()
