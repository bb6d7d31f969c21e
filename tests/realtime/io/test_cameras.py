"""Camera listing from a fake sysfs tree, index probing and mode probing with fake captures."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from realtime.core.errors import SourceError
from realtime.io.cameras import (
    CameraInfo,
    CameraMode,
    fourcc_to_str,
    list_cameras,
    list_loopback_devices,
    probe_modes,
)


def _fourcc(code: str) -> float:
    return float(sum(ord(ch) << (8 * i) for i, ch in enumerate(code)))


def _device(root: Path, node: str, name: str, index: int = 0, loopback: bool = False) -> None:
    folder = root / node
    folder.mkdir(parents=True)
    (folder / "name").write_text(name + "\n")
    (folder / "index").write_text(f"{index}\n")
    if loopback:
        # What v4l2loopback adds to its devices' sysfs folders.
        for attr in ("max_openers", "buffers", "format"):
            (folder / attr).write_text("2\n")


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    root = tmp_path / "video4linux"
    _device(root, "video0", "HD Pro Webcam C920")
    _device(root, "video1", "HD Pro Webcam C920", index=1)  # the UVC metadata node
    _device(root, "video2", "Integrated Camera: Integrated C")
    _device(root, "video10", "FaceCast", loopback=True)
    _device(root, "video12", "USB Capture HDMI")
    _device(root, "v4l-subdev0", "imx219 10-0010")
    return root


def test_linux_lists_real_cameras_in_numeric_order_without_loopback_or_metadata_nodes(sysfs: Path) -> None:
    cameras = list_cameras(platform="linux", sysfs_root=sysfs)

    assert cameras == [
        CameraInfo(0, "HD Pro Webcam C920", "/dev/video0"),
        CameraInfo(2, "Integrated Camera: Integrated C", "/dev/video2"),
        CameraInfo(12, "USB Capture HDMI", "/dev/video12"),
    ]


def test_loopback_devices_are_reported_separately(sysfs: Path) -> None:
    assert list_loopback_devices(platform="linux", sysfs_root=sysfs) == [
        CameraInfo(10, "FaceCast", "/dev/video10")
    ]
    assert list_loopback_devices(platform="win32", sysfs_root=sysfs) == []


def test_linux_without_video4linux_has_no_cameras(tmp_path: Path) -> None:
    def factory(index: int) -> FakeCapture:
        raise AssertionError("Linux must not probe indices when sysfs has no devices")

    missing = tmp_path / "nothing"
    assert list_cameras(platform="linux", sysfs_root=missing, capture_factory=factory) == []
    assert list_loopback_devices(platform="linux", sysfs_root=missing) == []


def test_missing_name_file_falls_back_to_node_name(tmp_path: Path) -> None:
    (tmp_path / "video3").mkdir()
    assert list_cameras(platform="linux", sysfs_root=tmp_path) == [CameraInfo(3, "video3", "/dev/video3")]


class FakeCapture:
    """A camera that supports `modes` ((w, h, fps, fourcc)) and snaps requests to the nearest."""

    def __init__(self, modes: list[tuple[int, int, float, str]], opened: bool = True) -> None:
        self.modes = modes
        self.opened = opened
        self.requested = {3: 0.0, 4: 0.0, 5: 0.0}
        self.released = False
        self.fail_reads_for: set[tuple[int, int]] = set()

    def isOpened(self) -> bool:
        return self.opened

    def set(self, prop_id: int, value: float) -> bool:
        self.requested[prop_id] = float(value)
        return True

    def _current(self) -> tuple[int, int, float, str]:
        w, h, fps = self.requested[3], self.requested[4], self.requested[5]
        return min(self.modes, key=lambda m: (abs(m[0] * m[1] - w * h), abs(m[2] - fps)))

    def get(self, prop_id: int) -> float:
        width, height, fps, fourcc = self._current()
        return {3: float(width), 4: float(height), 5: fps, 6: _fourcc(fourcc)}[prop_id]

    def read(self) -> tuple[bool, np.ndarray | None]:
        width, height, _, _ = self._current()
        if (int(self.requested[3]), int(self.requested[4])) in self.fail_reads_for:
            return False, None
        return True, np.zeros((height, width, 3), np.uint8)

    def release(self) -> None:
        self.released = True


def test_probe_modes_reports_what_the_camera_delivers_not_what_was_asked() -> None:
    cap = FakeCapture([(640, 480, 30.0, "YUYV"), (1280, 720, 30.0, "MJPG")])

    modes = probe_modes(0, capture_factory=lambda index: cap)

    # 1920x1080 snaps to 1280x720 and 720p60 to 720p30: each distinct delivered mode once.
    assert modes == (CameraMode(640, 480, 30.0, "YUYV"), CameraMode(1280, 720, 30.0, "MJPG"))
    assert str(modes[1]) == "1280x720@30 MJPG"
    assert cap.released


def test_probe_modes_skips_a_mode_that_yields_no_frame() -> None:
    cap = FakeCapture([(640, 480, 30.0, "YUYV"), (1280, 720, 30.0, "MJPG")])
    cap.fail_reads_for = {(640, 480)}

    modes = probe_modes(0, candidates=[(640, 480, 30), (1280, 720, 30)], capture_factory=lambda i: cap)

    assert modes == (CameraMode(1280, 720, 30.0, "MJPG"),)


def test_probe_modes_on_a_camera_that_does_not_open_raises_source_error_and_releases() -> None:
    cap = FakeCapture([], opened=False)

    with pytest.raises(SourceError, match="Camera 4 could not be opened") as info:
        probe_modes(4, capture_factory=lambda index: cap)

    assert info.value.hint
    assert cap.released


def test_probing_restores_opencv_log_level() -> None:
    before = cv2.utils.logging.getLogLevel()
    probe_modes(0, capture_factory=lambda index: FakeCapture([(640, 480, 30.0, "YUYV")]))
    assert cv2.utils.logging.getLogLevel() == before


def test_other_platforms_probe_indices_until_two_misses_in_a_row() -> None:
    present = {0, 2}
    opened: list[int] = []
    captures: list[FakeCapture] = []

    def factory(index: int) -> FakeCapture:
        opened.append(index)
        cap = FakeCapture([(640, 480, 30.0, "NV12")], opened=index in present)
        captures.append(cap)
        return cap

    cameras = list_cameras(max_index=10, platform="win32", capture_factory=factory)

    assert cameras == [CameraInfo(0, "Camera 0", None), CameraInfo(2, "Camera 2", None)]
    assert opened == [0, 1, 2, 3, 4]  # one gap is tolerated, two end the scan
    assert all(cap.released for cap in captures)


def test_fourcc_to_str() -> None:
    assert fourcc_to_str(_fourcc("MJPG")) == "MJPG"
    assert fourcc_to_str(0.0) == ""
    assert fourcc_to_str(float(0x01020304)) == ""  # not printable: unknown


def test_probe_modes_asks_as_a_capture_asks_so_the_list_shows_what_a_capture_gets() -> None:
    cap = FakeCapture([(640, 480, 30.0, "MJPG")])
    probe_modes(0, candidates=[(640, 480, 30)], capture_factory=lambda index: cap)
    assert cap.requested[6] == float(sum(ord(c) << (8 * i) for i, c in enumerate("MJPG")))


def test_listing_opens_cameras_through_the_backend_captures_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import cv2

    from realtime.io import cameras
    from realtime.io.camera_source import CameraSource

    # On Windows MSMF and DSHOW number cameras differently (only DSHOW sees OBS's virtual camera):
    # "Camera 1" in the list must be the camera a capture of index 1 opens.
    opened: list[tuple[int, ...]] = []
    closed_camera = FakeCapture([], opened=False)
    monkeypatch.setattr(cv2, "VideoCapture", lambda *args: opened.append(args) or closed_camera)
    cameras._open_capture(1)
    assert opened == [(1, CameraSource(1).settings.backend)]
    assert cameras.default_camera_backend("win32") == cameras.CAP_DSHOW


class _EnumeratedCamera:
    """cv2_enumerate_cameras.camera_info.CameraInfo's shape (1.4.0): what enumerate_cameras returns."""

    __slots__ = ("backend", "index", "name", "path", "pid", "vid")

    def __init__(self, index: int, name: str, path: str, backend: int) -> None:
        self.index, self.name, self.path, self.backend = index, name, path, backend
        self.vid, self.pid = 0x046D, 0x085E


def _fake_enumerator(monkeypatch: pytest.MonkeyPatch, answer: object) -> list[int]:
    """cv2_enumerate_cameras with its one entry point faked; returns the backends it was asked."""
    import types

    asked: list[int] = []

    def enumerate_cameras(apiPreference: int = 0) -> list[_EnumeratedCamera]:
        asked.append(apiPreference)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, list)
        return answer

    module = types.ModuleType("cv2_enumerate_cameras")
    module.enumerate_cameras = enumerate_cameras  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cv2_enumerate_cameras", module)
    return asked


@pytest.mark.parametrize(("platform", "backend"), [("win32", 700), ("darwin", 1200)])
def test_windows_and_macos_cameras_are_named_without_opening_any(
    monkeypatch: pytest.MonkeyPatch, platform: str, backend: int
) -> None:
    from realtime.io import cameras as module

    found = [
        _EnumeratedCamera(1, "OBS Virtual Camera", "", backend),
        _EnumeratedCamera(0, "Logitech BRIO", r"\\?\usb#vid_046d&pid_085e", backend),
        _EnumeratedCamera(2, "  ", "", backend),
    ]
    asked = _fake_enumerator(monkeypatch, found)
    monkeypatch.setattr(module, "_open_capture", lambda index: pytest.fail(f"camera {index} was opened"))

    cameras = list_cameras(platform=platform)

    assert asked == [backend]  # the backend captures use: the same numbering (DSHOW, AVFoundation)
    assert cameras == [
        CameraInfo(0, "Logitech BRIO", None),
        CameraInfo(1, "OBS Virtual Camera", None),
        CameraInfo(2, "Camera 2", None),  # a device without a name keeps its number
    ]


def test_when_the_enumerator_fails_or_is_missing_the_indices_are_probed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from realtime.io import cameras as module

    monkeypatch.setattr(module, "_open_capture", lambda index: FakeCapture([], opened=index == 0))
    _fake_enumerator(monkeypatch, OSError("COM initialisation failed"))
    assert list_cameras(platform="win32") == [CameraInfo(0, "Camera 0", None)]
    monkeypatch.setitem(sys.modules, "cv2_enumerate_cameras", None)  # not installed: ImportError
    assert list_cameras(platform="darwin") == [CameraInfo(0, "Camera 0", None)]
