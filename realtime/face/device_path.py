"""The device backend's names (realtime.face.device_backend) for the modules that import them from
here (realtime.tools.gpu_bench's `Copies`)."""

from __future__ import annotations

from realtime.face.device_backend import (
    Copies,
    DeviceBackend,
    DeviceRestorer,
    encode_signed_crop,
    encode_unit_crop,
)

DeviceFacePath = DeviceBackend

__all__ = ["Copies", "DeviceFacePath", "DeviceRestorer", "encode_signed_crop", "encode_unit_crop"]
