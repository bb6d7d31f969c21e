"""IOBinding for every session: inputs and outputs stay where the session computes.

`session.run(feeds)` copies every input to the device and every output back to numpy on each call.
With the CUDA provider that is two PCIe round trips per model per frame, and the output buffers are
re-allocated each time. `BoundSession` binds instead:

* inputs: a numpy array is bound with `bind_cpu_input`, an OrtValue that already lives on the
  device is bound as is, and a `TensorView` (a pointer into someone else's buffer, e.g. a band of
  rows of a device frame) is bound by pointer. ORT's IOBinding::BindInput copies an input that is
  on the wrong device *at bind time*: a numpy input of a CUDA session is uploaded when bound, while
  on the CPU provider it is read in place at run time. So pass a host array in `feeds` again
  whenever its contents change (the device_ops runners re-bind theta on every call);
* outputs: outputs whose shape is fully static get one OrtValue each, allocated once on the
  session's device and reused by every run (the same `data_ptr`); dynamic outputs are bound to the
  device with no buffer, so ORT allocates them per run;
* `chain(...)` feeds one session's output OrtValues straight into the next session's inputs, so a
  GPU pipeline never round-trips through the host (on the CPU provider the hand-over is zero-copy).

The device string comes from `session.get_providers()`, never from what was asked for: ORT silently
falls back to the CPU when CUDA cannot load, and binding a 'cuda' buffer to a CPU-only session
fails (docs/gpu-api-facts.md §2).

Reused output buffers are overwritten by the next run: consume (or copy) them first. `run_numpy`
always returns copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from onnx import helper

# ORT provider -> the OrtValue/IOBinding device string its buffers live on (read-only mapping).
_PROVIDER_DEVICE: Mapping[str, str] = MappingProxyType(
    {
        "CUDAExecutionProvider": "cuda",
        "TensorrtExecutionProvider": "cuda",  # TensorRT engines run on CUDA memory
        "DmlExecutionProvider": "dml",
        "CANNExecutionProvider": "cann",
    }
)
# ORT input/output type strings -> numpy dtypes (read-only mapping).
_ORT_TYPES: Mapping[str, npt.DTypeLike] = MappingProxyType(
    {
        "tensor(float)": np.float32,
        "tensor(float16)": np.float16,
        "tensor(double)": np.float64,
        "tensor(uint8)": np.uint8,
        "tensor(int8)": np.int8,
        "tensor(int32)": np.int32,
        "tensor(int64)": np.int64,
        "tensor(bool)": np.bool_,
    }
)
# The RunOptions key that skips ORT's end-of-run stream synchronisation (present in 1.31.1).
_NO_SYNC_KEY = "disable_synchronize_execution_providers"


def session_device(session: Any, wanted: str) -> str:
    """The device string to bind `session`'s buffers on: `wanted` when one of the session's live
    providers computes there, else 'cpu' (CUDA asked for but not loaded -> 'cpu')."""
    if wanted == "cpu":
        return "cpu"
    live = [_PROVIDER_DEVICE.get(p) for p in session.get_providers()]
    return wanted if wanted in live else "cpu"


def numpy_dtype(value: Any) -> np.dtype[Any]:
    """The numpy dtype of an OrtValue (its element_type() is an ONNX TensorProto enum)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(value.element_type())))


@dataclass(frozen=True, slots=True)
class TensorView:
    """A contiguous window of a buffer owned by someone else, bound by pointer.

    `owner` is kept referenced so the memory outlives the binding. Made with `rows()`: a band of
    rows of a C-contiguous tensor is contiguous, so a face's band of a device frame can be bound
    (read, or written in place) without a copy.
    """

    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    device_type: str
    owner: object

    @classmethod
    def rows(cls, value: Any, start: int, stop: int) -> TensorView:
        """Rows [start, stop) along axis 0 of an OrtValue or a C-contiguous numpy array."""
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                raise ValueError("TensorView.rows needs a C-contiguous array")
            shape = tuple(int(d) for d in value.shape)
            dtype, ptr, device = value.dtype, int(value.ctypes.data), "cpu"
        else:
            shape = tuple(int(d) for d in value.shape())
            dtype, ptr, device = numpy_dtype(value), int(value.data_ptr()), str(value.device_name())
        if not shape or not 0 <= start < stop <= shape[0]:
            raise ValueError(f"rows [{start}, {stop}) outside a tensor of shape {shape}")
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        return cls(ptr + start * row_bytes, (stop - start, *shape[1:]), dtype, device, value)


Feed: TypeAlias = "npt.NDArray[Any] | TensorView | Any"  # Any: ort.OrtValue (untyped module)


class BoundSession:
    """One session's IOBinding with reused output buffers. One instance per thread.

    `device_type` is the device the session really runs on (see `session_device`). Inputs left
    out of a `run` keep their previous binding (e.g. a source latent bound once per identity).
    """

    def __init__(
        self,
        session: Any,
        device_type: str,
        device_id: int = 0,
        *,
        synchronize: bool = True,
        fresh_outputs: bool = False,
    ) -> None:
        """fresh_outputs: every output allocated anew by each run (results handed on to others,
        e.g. an inference service's callers), never a reused buffer."""
        self.session = session
        self.device_type = session_device(session, device_type)
        self.device_id = device_id
        self.requested_device = device_type
        self._io = session.io_binding()
        self._inputs = {i.name: i for i in session.get_inputs()}
        self.output_names: list[str] = [o.name for o in session.get_outputs()]
        # What is bound now: held so numpy arrays / OrtValues / view owners outlive the binding
        # (bind_cpu_input is zero-copy on the CPU provider: ORT reads the caller's memory at run).
        self._bound: dict[str, Any] = {}
        self._bound_out: dict[str, Any] = {}  # caller buffers bound as outputs, same reason
        self._run_options: Any = None
        if not synchronize:
            # Only when asked: the caller then owns the stream ordering (e.g. the next session on
            # the same user stream, or io.synchronize_outputs() before reading on the host).
            self._run_options = ort.RunOptions()
            self._run_options.add_run_config_entry(_NO_SYNC_KEY, "1")
        self._static_outputs: dict[str, Any] = {}
        self._dynamic_outputs: list[str] = []
        for out in session.get_outputs():
            shape = list(out.shape or [])
            dtype = _ORT_TYPES.get(out.type)
            static = shape and dtype is not None and all(isinstance(d, int) and d > 0 for d in shape)
            if static and not fresh_outputs:
                buf = ort.OrtValue.ortvalue_from_shape_and_type(shape, dtype, self.device_type, device_id)
                self._static_outputs[out.name] = buf
                self._io.bind_ortvalue_output(out.name, buf)
            else:
                self._dynamic_outputs.append(out.name)

    @property
    def fell_back(self) -> bool:
        """True when a device was asked for but the session runs on the CPU."""
        return self.device_type != self.requested_device

    @property
    def bound_inputs(self) -> Mapping[str, Any]:
        """What each input is bound to now (read-only view; for checks and diagnostics)."""
        return MappingProxyType(self._bound)

    def static_output(self, name: str) -> Any:
        """The reused OrtValue behind a static-shape output."""
        return self._static_outputs[name]

    def bind_input(self, name: str, value: Feed) -> None:
        info = self._inputs.get(name)
        if info is None:
            raise KeyError(f"{name!r} is not an input of this session (inputs: {sorted(self._inputs)})")
        want = _ORT_TYPES.get(info.type)
        if isinstance(value, np.ndarray):
            if want is not None and value.dtype != np.dtype(want):
                raise TypeError(f"input {name!r} takes {info.type}, got a {value.dtype} array")
            # ascontiguousarray is a no-op for the usual contiguous arrays; the result is kept.
            arr = np.ascontiguousarray(value)
            self._io.bind_cpu_input(name, arr)
            self._bound[name] = arr
        elif isinstance(value, TensorView):
            self._check_device(name, value.device_type)
            if want is not None and value.dtype != np.dtype(want):
                raise TypeError(f"input {name!r} takes {info.type}, got a {value.dtype} view")
            self._io.bind_input(
                name, value.device_type, self.device_id, value.dtype, list(value.shape), value.ptr
            )
            self._bound[name] = value
        else:
            self._check_device(name, str(value.device_name()))
            if want is not None and numpy_dtype(value) != np.dtype(want):
                raise TypeError(f"input {name!r} takes {info.type}, got an OrtValue of {value.data_type()}")
            self._io.bind_ortvalue_input(name, value)
            self._bound[name] = value

    def bind_output(self, name: str, value: Any | None) -> None:
        """Send output `name` into a caller's buffer (OrtValue or TensorView; e.g. in place into a
        frame band), or with None back to this session's own buffer / allocate-on-run."""
        if name not in self.output_names:
            raise KeyError(f"{name!r} is not an output of this session (outputs: {self.output_names})")
        if value is None:
            own = self._static_outputs.get(name)
            if own is not None:
                self._io.bind_ortvalue_output(name, own)
            # (a dynamic output is re-bound for allocation at the next run)
            self._bound_out.pop(name, None)
        elif isinstance(value, TensorView):
            self._check_device(name, value.device_type)
            self._io.bind_output(
                name, value.device_type, self.device_id, value.dtype, list(value.shape), value.ptr
            )
            self._bound_out[name] = value
        else:
            self._check_device(name, str(value.device_name()))
            self._io.bind_ortvalue_output(name, value)
            self._bound_out[name] = value

    def run(self, feeds: Mapping[str, Feed] | None = None) -> list[Any]:
        """Bind `feeds`, run, and return the output OrtValues (on the session's device)."""
        for name, value in (feeds or {}).items():
            self.bind_input(name, value)
        missing = [n for n in self._inputs if n not in self._bound]
        if missing:
            raise ValueError(f"inputs never bound: {missing}")
        for name in self._dynamic_outputs:
            if name not in self._bound_out:
                # Re-bound before every run: after a run ORT keeps the OrtValue it allocated as if
                # the caller had pre-allocated it, and the next run with another shape fails
                # ("pre-allocated shapes must match"; ORT 1.31). Unbound, ORT allocates anew.
                self._io.bind_output(name, self.device_type, self.device_id)
        self.session.run_with_iobinding(self._io, self._run_options)
        return list(self._io.get_outputs())

    def run_numpy(self, feeds: Mapping[str, Feed] | None = None) -> list[npt.NDArray[Any]]:
        """Like run(), but host copies of the outputs (never views of the reused buffers)."""
        self.run(feeds)
        if self._run_options is not None:
            self._io.synchronize_outputs()
        return [np.asarray(a) for a in self._io.copy_outputs_to_cpu()]

    def _check_device(self, name: str, device: str) -> None:
        # Host memory can feed any session (ORT copies it); device memory only a session on that
        # device. Raise here rather than ORT's "no data transfer registered" error.
        if device not in ("cpu", self.device_type):
            raise ValueError(
                f"{name!r}: a buffer on {device!r} cannot be bound to a session running on "
                f"{self.device_type!r}"
            )


def chain(
    first: BoundSession,
    first_feeds: Mapping[str, Feed],
    second: BoundSession,
    second_feeds: Mapping[str, Feed],
    links: Mapping[str, str] | Sequence[tuple[str, str]],
) -> list[Any]:
    """Run `first`, bind its outputs named in `links` (first output -> second input) directly as
    `second`'s inputs, run `second` and return its outputs.

    The hand-over is the OrtValue itself: on CUDA it never leaves the device, on the CPU provider
    it is zero-copy. Example: the crop graph's `crop` -> the inswapper's `target`.
    """
    pairs = list(links.items()) if isinstance(links, Mapping) else list(links)
    produced = dict(zip(first.output_names, first.run(first_feeds), strict=True))
    feeds: dict[str, Feed] = dict(second_feeds)
    for out_name, in_name in pairs:
        if out_name not in produced:
            raise KeyError(f"{out_name!r} is not an output of the first session ({first.output_names})")
        feeds[in_name] = produced[out_name]
    return second.run(feeds)
