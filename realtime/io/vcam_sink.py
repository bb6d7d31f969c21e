"""The virtual camera sink (pyvirtualcam) and what to tell the user when its driver is missing."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Protocol

import numpy as np
import pyvirtualcam
import pyvirtualcam.camera

from models.types import ImageBGR
from realtime.core.errors import SinkError, VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame
from realtime.io.frame_fit import DEFAULT_FPS, _even, letterbox_into
from realtime.io.output_info import OutputInfo

ALTERNATIVES_HINT = "Meanwhile use `--output window` to preview, or write a file such as `--output out.mp4`."

LINUX_MODPROBE = "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=FaceCast"
LINUX_RELOAD = f"sudo modprobe -r v4l2loopback && {LINUX_MODPROBE}"


class CameraLike(Protocol):
    """The part of pyvirtualcam.Camera the sink uses."""

    def send(self, frame: ImageBGR) -> None: ...

    def sleep_until_next_frame(self) -> None: ...

    def close(self) -> None: ...


def virtual_camera_fix(platform: str = sys.platform, error_text: str = "", loopback_devices: int = 0) -> str:
    """What the user should do so a virtual camera can be opened, from pyvirtualcam's error text
    (and, on Linux, how many v4l2loopback devices exist: pyvirtualcam says "no device found" both
    when the module is not loaded and when every device is taken by another program)."""
    text = error_text.lower()
    if platform.startswith("linux") and loopback_devices > 0 and "no v4l2 loopback device" in text:
        return (
            f"The virtual camera exists ({loopback_devices} v4l2loopback device"
            f"{'s' if loopback_devices > 1 else ''}) but another program is sending to it (OBS's virtual "
            "camera, another FaceCast): close that program, or add a device for FaceCast with "
            f"`sudo modprobe -r v4l2loopback && {LINUX_MODPROBE.replace('devices=1', 'devices=2')}`."
        )
    if platform.startswith("linux"):
        if "permission" in text or "'video' group" in text:
            return (
                "Give your user access to the video devices: `sudo usermod -a -G video $USER`, "
                "then log out and back in."
            )
        if "already in use" in text:
            return (
                "Another program is already sending to the virtual camera: close it, or create two devices "
                f"with `sudo modprobe -r v4l2loopback && {LINUX_MODPROBE.replace('devices=1', 'devices=2')}`."
            )
        if "not a video output device" in text:
            return (
                "That device is not a v4l2loopback output: leave the device unset or pick the FaceCast "
                "device from `v4l2-ctl --list-devices`; if it worked before, reload the module: "
                f"`{LINUX_RELOAD}`."
            )
        return (
            f"Load the v4l2loopback kernel module: `{LINUX_MODPROBE}` (if modprobe says the module "
            "is not found, install it first: `sudo apt install v4l2loopback-dkms`)."
        )
    if platform.startswith("win"):
        if "could not be started" in text or "in use" in text:
            return (
                "Only one program can drive the virtual camera: stop 'Virtual Camera' in OBS "
                "(or close the other app using it) and try again."
            )
        return (
            "Install OBS Studio 26 or newer, which provides the 'OBS Virtual Camera' device; if it is "
            "still not found, click 'Start Virtual Camera' in OBS once and stop it again."
        )
    if platform == "darwin":
        if "could not be started" in text or "couldn't start" in text or "could not start" in text:
            return (
                "Only one program can drive the virtual camera: if OBS's own 'Virtual Camera' is "
                "started, stop it in OBS and try again. Otherwise restart OBS once, so that its camera "
                "extension is running."
            )
        return (
            "Install OBS Studio 30 or newer, click 'Start Virtual Camera' in OBS once and stop it again, "
            "then approve the system extension in System Settings → Privacy & Security "
            "(a restart may be needed)."
        )
    return f"No virtual camera driver is supported on this system ({platform})."


# pyvirtualcam's backends and the systems they exist on (a name from another OS is not "unknown").
_BACKENDS_BY_OS: Mapping[str, str] = MappingProxyType(
    {"obs": "Windows and macOS", "unitycapture": "Windows", "v4l2loopback": "Linux"}
)


class VirtualCameraSink:
    """Sends letterboxed BGR frames to a pyvirtualcam device at a size and rate fixed at open()."""

    def __init__(
        self,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        backend: str | None = None,
        device: str | None = None,
        pace: bool = True,
        camera_factory: Callable[..., CameraLike] = pyvirtualcam.Camera,
    ) -> None:
        self._requested = (width, height, fps)
        self._backend = backend
        self._device = device
        self.pace = pace
        self._camera_factory = camera_factory
        self._camera: CameraLike | None = None
        self._buffer: ImageBGR | None = None
        self._fps = 0.0
        self._device_name = ""
        self.frames_sent = 0

    @property
    def size(self) -> tuple[int, int]:
        return (0, 0) if self._buffer is None else (int(self._buffer.shape[1]), int(self._buffer.shape[0]))

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def description(self) -> str:
        w, h = self.size
        return f"virtual camera {self._device_label} ({w}x{h} @ {self._fps:g} fps)"

    def output_info(self) -> OutputInfo:
        """The device, size and rate while open; nothing before open() or after close()."""
        if self._camera is None:
            return OutputInfo()
        w, h = self.size
        return OutputInfo(vcam=f"{self._device_label}, {w}x{h} @ {self._fps:g}")

    @property
    def _device_label(self) -> str:
        return self._device_name or self._device or "virtual camera"

    def open(self, width: int, height: int, fps: float) -> None:
        req_w, req_h, req_fps = self._requested
        # Even sizes: v4l2loopback converts to I420, and odd widths break in Chrome.
        w, h = _even(req_w or width), _even(req_h or height)
        rate = req_fps or fps or DEFAULT_FPS
        self._check_backend_name()
        try:
            camera = self._camera_factory(
                w, h, rate, fmt=pyvirtualcam.PixelFormat.BGR, device=self._device, backend=self._backend
            )
        except KeyError as err:
            raise SinkError(
                f"Unknown virtual camera backend '{self._backend}'.",
                hint="Leave the backend unset to try every installed one.",
            ) from err
        except RuntimeError as err:
            raise _unavailable(str(err)) from err
        self._camera = camera
        self._device_name = str(getattr(camera, "device", "") or "")
        self._fps = float(rate)
        self._buffer = np.zeros((h, w, 3), np.uint8)  # reused for every frame
        self.frames_sent = 0

    def _check_backend_name(self) -> None:
        # pyvirtualcam looks an unknown name up before it is fully constructed, and its __del__ then
        # prints a stray AttributeError; checking first gives the user one clean message instead.
        if self._backend is None or self._camera_factory is not pyvirtualcam.Camera:
            return
        installed = sorted(pyvirtualcam.camera.BACKENDS)
        if self._backend not in installed:
            known = self._backend in _BACKENDS_BY_OS
            raise SinkError(
                f"The virtual camera backend '{self._backend}' is not available on this system"
                f" (it is for {_BACKENDS_BY_OS[self._backend]})."
                if known
                else f"Unknown virtual camera backend '{self._backend}'.",
                hint=f"Installed backends: {', '.join(installed) or 'none'}; or leave it unset to try each.",
            )

    def send(self, frame: VideoFrame) -> None:
        if self._camera is None or self._buffer is None:
            raise RuntimeError("VirtualCameraSink.send() called before open()")
        letterbox_into(frame.image, self._buffer)
        try:
            self._camera.send(self._buffer)
        except RuntimeError as err:
            raise SinkError(
                f"The virtual camera stopped accepting frames ({err}).",
                hint="Restart FaceCast; on Linux check that v4l2loopback is still loaded.",
            ) from err
        self.frames_sent += 1
        if self.pace:
            self._camera.sleep_until_next_frame()

    def close(self) -> None:
        camera, self._camera = self._camera, None
        if camera is not None:
            camera.close()

    def abort(self) -> None:
        # A virtual camera keeps nothing half-written: aborting is closing.
        self.close()


def _unavailable(error_text: str) -> VirtualCameraUnavailableError:
    reason = "; ".join(line.strip() for line in error_text.splitlines() if line.strip()) or "no backend"
    from realtime.io.cameras import list_loopback_devices  # sysfs only; Linux

    fix = virtual_camera_fix(sys.platform, error_text, len(list_loopback_devices()))
    if not reason.endswith((".", "?", "!")):
        reason += "."
    message = f"Virtual camera unavailable: {reason} Fix: {fix}"
    return VirtualCameraUnavailableError(message, hint=ALTERNATIVES_HINT)
