"""Hints spell commands that work when pasted: this interpreter, this checkout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from models.cli_text import PROJECT_ROOT, app_command, installer_command, shown_path
from models.files.store import download_command


def test_app_commands_name_the_running_interpreter_not_a_bare_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    command = app_command("doctor")
    assert command.endswith(" main.py doctor") and not command.startswith("python ")
    assert Path(command.split(" ")[0]).resolve() == Path(sys.executable).resolve()
    assert download_command("det_10g").endswith("main.py models download det_10g")


def test_from_another_folder_main_py_is_found_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert str(PROJECT_ROOT / "main.py") in app_command("doctor")


def test_paths_with_spaces_are_quoted_for_each_shell() -> None:
    spaced = Path("/Users/First Last/FaceCast/.venv/bin/python")
    assert shown_path(spaced, "linux") == f'"{spaced}"'
    assert shown_path(spaced, "win32") == f'& "{spaced}"'  # PowerShell runs a quoted path with &
    assert installer_command("win32").startswith("py -3 ")
    assert installer_command("linux").startswith("python3 ")


def test_a_command_in_a_folder_with_spaces_has_one_ampersand_on_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`& "python.exe" & "main.py" ...` does not run in PowerShell: `&` goes before the program only."""
    import models.cli_text as cli_text

    root = Path("/Users/First Last/FaceCast")
    monkeypatch.setattr(cli_text, "PROJECT_ROOT", root)
    monkeypatch.setattr(cli_text.sys, "executable", str(root / ".venv" / "python.exe"))
    real = cli_text.shown_path
    monkeypatch.setattr(cli_text, "shown_path", lambda path, platform="win32": real(path, platform))
    command = cli_text.app_command("doctor")
    assert command.count("&") == 1 and command.startswith("& ")
    assert f'"{root / "main.py"}" doctor' in command
