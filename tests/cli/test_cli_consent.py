"""The command line asks for the consent the panel asks for, once, stored in the same place; the
disclosure mark is on by default for live outputs, as in the panel."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

import main
from models.errors import ExitCode
from realtime.consent import CONSENT_ENV, consent_path, consent_recorded, ensure_consent
from realtime.tools.cli_args import build_parser
from realtime.tools.cli_run import _settings_for_run


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_consent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv(CONSENT_ENV, raising=False)
    settings = tmp_path / "config" / "settings.toml"
    monkeypatch.setenv("FACECAST_CONFIG", str(settings))
    return consent_path()


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    # A missing photo: the run stops right after the consent check, at the first real step.
    return ["run", "--source", str(tmp_path / "nope.png"), "--input", str(tmp_path / "nope.png"),
            "--output", "null", *extra]  # fmt: skip


def test_a_non_interactive_run_without_consent_fails_with_its_own_code(
    no_consent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main.main(run_args(tmp_path), out=io.StringIO())
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == ExitCode.NO_CONSENT == 10 and len(lines) == 1 and "Traceback" not in err
    assert "--consent" in lines[0] and "FACECAST_CONSENT=1" in lines[0]
    assert not no_consent.exists()


def test_consent_by_flag_is_stored_and_not_asked_again(
    no_consent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main.main(run_args(tmp_path, "--consent"), out=io.StringIO())
    assert code == 2 and "Input not found" in capsys.readouterr().err  # past the consent check
    assert consent_recorded(no_consent)
    assert main.main(run_args(tmp_path), out=io.StringIO()) == 2  # stored: no flag needed now


def test_the_environment_variable_gives_consent_for_one_run_only(
    no_consent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv(CONSENT_ENV, "1")
    assert main.main(run_args(tmp_path), out=io.StringIO()) == 2
    assert not consent_recorded(no_consent)


@pytest.mark.parametrize(
    ("answer", "accepted"), [("yes\n", True), ("y\n", True), ("no\n", False), ("", False)]
)
def test_an_interactive_terminal_is_asked(no_consent: Path, answer: str, accepted: bool) -> None:
    said: list[str] = []
    if accepted:
        ensure_consent(False, Terminal(answer), said.append)
    else:
        with pytest.raises(Exception, match="consent was not confirmed") as info:
            ensure_consent(False, Terminal(answer), said.append)
        assert getattr(info.value, "exit_code", None) == ExitCode.NO_CONSENT
    text = "\n".join(said)
    assert "inswapper_128" in text and "I have the consent of every person" in text
    assert consent_recorded(no_consent) is accepted


def test_the_panel_and_the_command_line_read_one_confirmation(no_consent: Path, tmp_path: Path) -> None:
    from gui.app import ask_consent
    from gui.config import ConfigStore, GuiConfig

    store = ConfigStore()  # $FACECAST_CONFIG: the same folder as the command line's file
    ensure_consent(True, io.StringIO(""), print)  # accepted on the command line
    config = ask_consent(GuiConfig(), store)  # no dialog: it was given already
    assert isinstance(config, GuiConfig) and config.consent_accepted

    no_consent.unlink()
    config = ask_consent(GuiConfig(consent_accepted=True), store)  # an older panel's acceptance
    assert isinstance(config, GuiConfig) and consent_recorded(no_consent)


def settings_for(*argv: str) -> bool:
    args = build_parser().parse_args(["run", "--source", "a.png", "--input", "0", *argv])
    assert isinstance(args, argparse.Namespace)
    return _settings_for_run(args).composite.disclosure_label


def test_the_disclosure_mark_is_on_for_live_outputs_unless_turned_off() -> None:
    assert settings_for("--output", "vcam") is True
    assert settings_for("--output", "window") is True
    assert settings_for("--output", "vcam", "--no-label") is False
    assert settings_for("--output", "vcam", "--label") is True  # still accepted
    assert settings_for("--output", "out.mp4") is False  # a file: the preset's (off) unless --label
    assert settings_for("--output", "out.mp4", "--label") is True
    assert settings_for("--output", "vcam", "--set", "composite.disclosure_label=false") is False
    with pytest.raises(SystemExit):
        settings_for("--output", "vcam", "--label", "--no-label")


def test_run_owns_the_one_consent_flag_and_remote_runs_share_it() -> None:
    parser = build_parser()
    run = next(
        a
        for a in parser._subparsers._group_actions[0].choices.values()
        if a.prog.endswith(" run")  # type: ignore[union-attr]
    )
    assert [a.option_strings for a in run._actions].count(["--consent"]) == 1
    args = parser.parse_args(["run", "--source", "a.png", "--input", "0", "--output", "vcam", "--consent"])
    assert args.consent is True
