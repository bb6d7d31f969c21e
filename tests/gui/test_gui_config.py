"""Settings saved on exit and restored on start; a broken file never stops the app; consent asked once."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display here

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from PyQt6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from gui.app import ask_consent, create_window
from gui.config import (
    CONFIG_ENV,
    ConfigNotSaved,
    ConfigStore,
    GuiConfig,
    InputConfig,
    MapEntry,
    OutputConfig,
    config_from_dict,
    default_config_path,
)
from gui.consent import ConsentDialog, licence_lines
from tests.gui.test_gui_helpers import services_for, wait_for_face, write_face_photo


def full_config(photos: tuple[Path, ...]) -> GuiConfig:
    """Every field away from its default."""
    return GuiConfig(
        consent_accepted=True,
        preset="quality",
        overrides={"detector.model": "mtcnn", "detector.interval": 2, "composite.opacity": 0.75},
        disclosure_label=False,
        photos=tuple(str(p) for p in photos),
        active_face=str(photos[-1]),
        view="swapped",
        input=InputConfig(
            kind="video", camera_index=3, video_path="/videos/talk.mp4", width=640, height=480, fps=25.0
        ),
        output=OutputConfig(
            vcam=False,
            vcam_width=640,
            vcam_height=360,
            vcam_fps=25.0,
            record=True,
            record_path="/tmp/out.mp4",
        ),
        window_geometry="AdnQywADAAAAAAAAAAAAAAAAA",
        picked_recognizer="dlib",
        picked_embedding=(0.25, -0.5, 0.75),
        face_map=(
            MapEntry("dlib", (0.5, 0.5), str(photos[-1])),
            MapEntry("arcface", (-1.0, 0.0, 0.25), str(photos[0])),
        ),
    )


def test_the_config_file_round_trips_every_field(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "FaceCast" / "settings.toml")
    config = full_config((Path("/photos/a.jpg"), Path("/photos/b.png")))
    store.save(config)
    loaded = store.load()
    assert loaded.message == ""
    assert loaded.config == config
    assert tomllib.loads(store.path.read_text())["overrides"]["detector.interval"] == 2  # plain TOML


def test_a_broken_face_map_entry_is_dropped_alone() -> None:
    """If this broke, one bad [[map]] entry would lose the whole map (or keep a useless entry)."""
    good = {"recognizer": "dlib", "embedding": [0.6, 0.8], "face": "/photos/a.jpg"}
    bad = [{"recognizer": "dlib", "embedding": ["x"], "face": "/photos/b.jpg"}, {"face": "/p.jpg"}, 3]
    config, problems = config_from_dict({"map": [good, *bad]})
    assert config.face_map == (MapEntry("dlib", (0.6, 0.8), "/photos/a.jpg"),)
    assert len(problems) == 3 and all("'map' entry" in p for p in problems)
    config, problems = config_from_dict({"map": {"face": "a"}})
    assert config.face_map == () and problems


def test_no_file_means_defaults_and_no_message(tmp_path: Path) -> None:
    loaded = ConfigStore(tmp_path / "settings.toml").load()
    assert loaded == type(loaded)(GuiConfig())
    assert not (tmp_path / "settings.toml.bak").exists()


def test_the_config_path_is_in_the_user_config_folder_unless_overridden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    default = default_config_path()
    assert default.name == "settings.toml" and default.parent.name == "FaceCast"
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "mine.toml"))
    assert default_config_path() == tmp_path / "mine.toml"


@pytest.mark.parametrize(
    "content",
    [
        b'preset = "balanced"\n[input\nkind = ',  # not TOML
        b"\xff\xfe\x00garbage",  # not even text
        b"version = 99\n",  # from a newer FaceCast
    ],
)
def test_an_unparsable_file_gives_defaults_and_a_message_and_is_kept_as_bak(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "settings.toml"
    path.write_bytes(content)
    loaded = ConfigStore(path).load()
    assert loaded.config == GuiConfig()
    assert "defaults are in use" in loaded.message and "settings.toml.bak" in loaded.message
    assert (tmp_path / "settings.toml.bak").read_bytes() == content


def test_bad_keys_fall_back_one_by_one_and_the_rest_is_kept(tmp_path: Path) -> None:
    """One wrong value used to reset everything: consent asked again, the gallery emptied."""
    content = """
consent_accepted = true
preset = 5
view = "upside-down"
[faces]
photos = ["/photos/a.png", 3]
[input]
kind = "video"
video_path = "/videos/talk.mp4"
fps = 5000
width = 1280.0
camera = 2
[output]
vcam_fps = nan
record = true
[window]
geometry = "caf\u00e9"
[overrides]
"composite.opacity" = 0.5
detector.size = 320
""".encode()
    path = tmp_path / "settings.toml"
    path.write_bytes(content)
    loaded = ConfigStore(path).load()
    config = loaded.config
    # Kept: everything that was fine, including an override written as a plain TOML dotted key.
    assert config.consent_accepted and config.photos == ("/photos/a.png",)
    assert config.input.kind == "video" and config.input.video_path == "/videos/talk.mp4"
    assert config.output.record
    assert config.overrides == {"composite.opacity": 0.5, "detector.size": 320}
    # Back to defaults: exactly the bad ones.
    default = GuiConfig()
    assert (config.preset, config.view, config.window_geometry) == (default.preset, default.view, "")
    assert config.input.fps == default.input.fps and config.input.width == default.input.width
    assert config.output.vcam_fps == default.output.vcam_fps
    message = loaded.message
    assert "could not be used" in message and "and 4 more" in message  # 8 named: the first 4 listed
    assert "settings.toml.bak" in message
    assert (tmp_path / "settings.toml.bak").read_bytes() == content
    _, problems = config_from_dict(tomllib.loads(content.decode()))
    named = " ".join(problems)
    for key in (
        "input.fps",
        "input.width",
        "input.camera",
        "output.vcam_fps",
        "window.geometry",
        "faces.photos",
    ):
        assert key in named, key


def test_a_file_that_cannot_be_read_is_never_written_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('consent_accepted = true\npreset = "quality"\n')
    original = path.read_bytes()
    real_read = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    store = ConfigStore(path)
    loaded = store.load()
    assert loaded.config == GuiConfig()
    assert "Permission denied" in loaded.message and "will not be written over" in loaded.message
    with pytest.raises(ConfigNotSaved, match="could not be read"):
        store.save(replace(GuiConfig(), consent_accepted=True))
    monkeypatch.undo()
    assert path.read_bytes() == original


def test_a_file_that_cannot_be_backed_up_is_never_written_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text("preset = 5\n")

    def no_copy(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gui.config.shutil.copy2", no_copy)
    store = ConfigStore(path)
    assert "will not be written over" in store.load().message
    with pytest.raises(ConfigNotSaved):
        store.save(GuiConfig())
    assert path.read_text() == "preset = 5\n"


def test_saving_keeps_links_and_permissions_and_respects_read_only(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "facecast.toml"
    real.parent.mkdir()
    real.write_text("")
    os.chmod(real, 0o600)
    link = tmp_path / "settings.toml"
    link.symlink_to(real)
    ConfigStore(link).save(replace(GuiConfig(), preset="quality"))
    assert link.is_symlink() and tomllib.loads(real.read_text())["preset"] == "quality"
    assert real.stat().st_mode & 0o777 == 0o600  # private stays private

    os.chmod(real, 0o444)
    with pytest.raises(ConfigNotSaved, match="read-only"):
        ConfigStore(link).save(GuiConfig())
    assert tomllib.loads(real.read_text())["preset"] == "quality"


def test_a_failed_save_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.toml"
    store = ConfigStore(path)
    store.save(replace(GuiConfig(), preset="quality"))
    real_write = Path.write_text

    def full_disk(self: Path, *args: object, **kwargs: object) -> int:
        real_write(self, "partial", encoding="utf-8")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space"):
        store.save(GuiConfig())
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.toml"]
    assert store.load().config.preset == "quality"


def test_the_window_restores_what_it_saved_on_exit(
    qtbot: QtBot, tmp_path: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    photos = (write_face_photo(tmp_path / "a.png"), write_face_photo(tmp_path / "b.png", variant=1))
    services = services_for(tmp_path, models_dir)
    store = ConfigStore(services.config_path)
    first = create_window(services, store.load(), store)
    qtbot.addWidget(first)
    # What a user does: add faces, pick the second, change preset, a stage control, label, view, input.
    first.gallery.add_photos(photos)
    qtbot.waitUntil(lambda: len(first.gallery.usable_faces()) == 2, timeout=15_000)
    first.gallery.set_active(photos[1])
    first.stage_panel.preset_combo.setCurrentText("ultra-low-latency")
    first.stage_panel.widget_for("detector.interval").setValue(4)  # type: ignore[attr-defined]
    first.output_panel.label_check.setChecked(False)
    first.output_panel.record_check.setChecked(True)
    first.view_combo.setCurrentIndex(first.view_combo.findData("original"))
    first.input_panel.camera_radio.setChecked(True)
    first.show()
    # Above the window's minimum size, within the offscreen screen (800x800), which
    # restoreGeometry respects.
    first.resize(780, 560)
    first.close()

    saved = store.load()
    assert saved.message == ""
    config = saved.config
    assert config.photos == tuple(str(p) for p in photos) and config.active_face == str(photos[1])
    assert config.preset == "ultra-low-latency" and config.overrides == {"detector.interval": 4}
    assert not config.disclosure_label and config.view == "original"
    assert config.input.kind == "camera" and config.output.record
    assert config.window_geometry

    second = create_window(services, saved, store)
    qtbot.addWidget(second)
    wait_for_face(qtbot, second)
    restored = second.current_config()
    assert replace(restored, window_geometry="") == replace(config, window_geometry="")
    assert (second.width(), second.height()) == (780, 560)
    assert second.stage_panel.widget_for("detector.interval").value() == 4  # type: ignore[attr-defined]
    assert not second.output_panel.label_check.isChecked()
    assert second.controller.state.value == "idle"


def test_a_corrupt_file_is_reported_in_the_window_not_a_dialog_and_replaced_on_exit(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    services = services_for(tmp_path, models_dir)
    services.config_path.write_text("[[[ this is not toml")
    store = ConfigStore(services.config_path)
    window = create_window(services, store.load(), store)
    qtbot.addWidget(window)
    window.show()

    texts = window.messages.texts()
    assert len(texts) == 1 and "could not be read" in texts[0] and ".bak" in texts[0]
    assert QApplication.activeModalWidget() is None
    assert window.output_panel.label_check.isChecked()  # defaults: the disclosure label on
    window.close()
    assert store.load().message == ""  # a valid file again
    assert store.backup_path.read_text() == "[[[ this is not toml"  # the original kept


def test_a_saved_stage_setting_that_no_longer_applies_is_dropped_alone(
    qtbot: QtBot, tmp_path: Path, models_dir: Path
) -> None:
    services = services_for(tmp_path, models_dir)
    store = ConfigStore(services.config_path)
    config = GuiConfig(consent_accepted=True, overrides={"detector.size": 333, "detector.interval": 5})
    window = create_window(services, type(store.load())(config), store)
    qtbot.addWidget(window)
    assert window.current_config().overrides == {"detector.interval": 5}
    assert any("detector.size" in t for t in window.messages.texts())


def test_consent_is_asked_once_and_needs_the_box_ticked(qtbot: QtBot, tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "settings.toml")
    accepted = GuiConfig(consent_accepted=True)
    assert ask_consent(accepted, store) is accepted  # no dialog once consent is stored

    dialog = ConsentDialog()
    qtbot.addWidget(dialog)
    assert not dialog.continue_button.isEnabled()
    dialog.consent_check.setChecked(True)
    assert dialog.continue_button.isEnabled()
    lines = licence_lines()
    assert any(line.startswith("inswapper_128") and "non-commercial research only" in line for line in lines)
    assert any(line.startswith("buffalo_l") and "non-commercial research only" in line for line in lines)
