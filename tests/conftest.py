"""Shared pytest fixtures. Media helpers live in tests/fixtures_media.py (importable from tests)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pyvirtualcam
from hypothesis import settings

from tests import fixtures_media
from tests.vcam_recorder import RecordingBackendHandle, recording_backend

# CI must be deterministic (a red run blocks landing), so by default hypothesis draws the same
# examples every run; HYPOTHESIS_PROFILE=explore draws fresh ones to hunt for new failures locally.
settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session", autouse=True)
def provenance_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every file output is signed: the signing key is made once per session in a temp folder,
    never in the user's own data folder. A test may point $FACECAST_PROVENANCE_DIR elsewhere."""
    folder = tmp_path_factory.mktemp("provenance") / "keys"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FACECAST_PROVENANCE_DIR", str(folder))
        yield folder


@pytest.fixture
def make_test_video() -> Callable[..., Path]:
    """make_test_video(path, frames=30, size=(96, 64), fps=25.0, codec=None) -> Path: a small clip
    whose frames carry their number (read it back with fixtures_media.read_frame_number)."""
    return fixtures_media.make_test_video


@pytest.fixture
def vcam_recorder() -> Iterator[RecordingBackendHandle]:
    """A pyvirtualcam backend recording every frame sent to it; pass `.name` as the backend."""
    with recording_backend() as handle:
        yield handle


# ---- shared by the control-panel tests (imported lazily: Qt only loads where it is used) ----------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model doubles, written once per test module."""
    from tests.gui.test_gui_helpers import write_models

    return write_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def face_photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A photo with one face (the astronaut), written once per test module."""
    from tests.gui.test_gui_helpers import write_face_photo

    return write_face_photo(tmp_path_factory.mktemp("photos") / "astronaut.png")


@pytest.fixture
def failing_vcam_backend() -> Iterator[str]:
    """A pyvirtualcam backend that fails exactly as v4l2loopback does when the module is not loaded."""

    class MissingDriver:
        def __init__(self, **kwargs: Any) -> None:
            raise RuntimeError(
                "No v4l2 loopback device found at /dev/video[0-99]. Did you run 'modprobe v4l2loopback'? "
                "See also pyvirtualcam's documentation."
            )

    name = "facecast-test-missing-driver"
    pyvirtualcam.register_backend(name, MissingDriver)
    try:
        yield name
    finally:
        pyvirtualcam.camera.BACKENDS.pop(name, None)


@pytest.fixture(autouse=True)
def _consent_given_and_settings_kept_aside(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A run needs the user's confirmation of consent: the tests give it with FACECAST_CONSENT=1
    (the consent tests take it away), and the settings and consent files they write stay out of
    the user's own config folder."""
    monkeypatch.setenv("FACECAST_CONSENT", "1")
    config = tmp_path_factory.getbasetemp() / "user-config" / "settings.toml"
    monkeypatch.setenv("FACECAST_CONFIG", str(config))
