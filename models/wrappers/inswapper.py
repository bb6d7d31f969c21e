"""inswapper_128 face swapper (fp32 and fp16 files).

Contract (docs/model-contracts.md, "Swapper"): inputs `target` [1,3,128,128] (aligned 128 px crop, RGB,
x / 255) and `source` [1,512] (latent = normed_embedding @ emap, renormalised); output `output`
[1,3,128,128] RGB in [0, 1]. `emap` is not an input: it is the graph's last initializer, read from
the file once at load time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import platformdirs
from onnx import numpy_helper

from models.errors import ModelContractError, ModelOutputError
from models.runtime.session import SessionFactory
from models.types import FloatArray, ImageBGR

log = logging.getLogger(__name__)

TARGET_NAME = "target"
SOURCE_NAME = "source"
CROP_SIZE = 128
LATENT_SIZE = 512
TARGET_SHAPE = [1, 3, CROP_SIZE, CROP_SIZE]
SOURCE_SHAPE = [1, LATENT_SIZE]
# ORT type string -> the numpy dtype to feed (read-only: no module-level mutable state).
_FLOAT_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)
_EMAP_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)

CONTRACT_TEXT = (
    f"inputs target[1,3,{CROP_SIZE},{CROP_SIZE}] + source[1,{LATENT_SIZE}] "
    f"and one output [1,3,{CROP_SIZE},{CROP_SIZE}]"
)


def _fmt_shape(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else "?" for d in (shape or [])) + "]"


EMAP_CACHE_MIN_BYTES = 50_000_000  # only real models are worth caching (parsing one takes seconds)


def emap_cache_path(path: Path, cache_dir: Path) -> Path:
    """Where the emap of `path` is cached: keyed by name, size and mtime, so a replaced file misses."""
    st = path.stat()
    return cache_dir / f"{path.name}-{st.st_size}-{st.st_mtime_ns}.emap.npy"


def read_emap_cached(path: Path | str, cache_dir: Path | None = None) -> FloatArray:
    """read_emap, cached as a 1 MB .npy beside the user cache for large model files.

    Parsing the 554 MB inswapper protobuf holds the GIL for about a second and briefly doubles
    memory; uncached, that happens once per swap worker at every start and model reload.
    """
    p = Path(path)
    if p.stat().st_size < EMAP_CACHE_MIN_BYTES:
        return read_emap(p)
    folder = cache_dir or Path(platformdirs.user_cache_dir("FaceCast")) / "emap"
    cached = emap_cache_path(p, folder)
    if cached.is_file():
        try:
            emap = np.load(cached, allow_pickle=False)
            if emap.shape == (LATENT_SIZE, LATENT_SIZE) and emap.dtype == np.float32:
                return np.ascontiguousarray(emap)
        except (OSError, ValueError) as exc:
            log.warning("Ignoring unreadable emap cache %s (%s)", cached, exc)
    emap = read_emap(p)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp.npy")
        np.save(tmp, emap)
        os.replace(tmp, cached)
    except OSError as exc:
        # A read-only cache only costs the parse next time.
        log.warning("Cannot cache the emap in %s (%s)", folder, exc)
    return emap


def read_emap(path: Path | str) -> FloatArray:
    """The 512x512 embedding map: the graph's LAST initializer, as insightface reads it.

    load_external_data=False: the emap is stored inline, and the 554 MB of weights need not be
    copied a second time (ORT already holds them).
    """
    model = onnx.load(str(path), load_external_data=False)
    inits = model.graph.initializer
    name = Path(path).name
    if len(inits) == 0:
        raise ModelContractError(
            f"{name}: the graph has no initializers, so no emap (expected 512x512 last)."
        )
    last = inits[-1]
    if list(last.dims) != [LATENT_SIZE, LATENT_SIZE] or last.data_type not in _EMAP_TYPES:
        raise ModelContractError(
            f"{name}: the last initializer ({last.name!r}, dims {list(last.dims)}, "
            f"{onnx.TensorProto.DataType.Name(last.data_type)}) is not the 512x512 float emap "
            "inswapper needs."
        )
    # The fp16 file may store the emap as float16; the latent is computed in float32 either way.
    return np.ascontiguousarray(numpy_helper.to_array(last), dtype=np.float32)


def _non_finite_output() -> ModelOutputError:
    # Cast to uint8, NaN would become black: a black square in the face.
    return ModelOutputError(
        "The face swapper returned NaN or infinite values (a float16 overflow?).",
        hint="Use the fp32 swapper (swap.model = inswapper_128).",
    )


class InSwapper:
    """Face swapper. `swap(crop, latent)` -> swapped crop. One instance per thread (reused blobs).

    Inference is split into _load_target/_load_source (fill the input buffers), _infer (run) and
    _decode (to BGR uint8), so an IOBinding path can replace _infer alone.
    """

    input_size = CROP_SIZE

    def __init__(self, session: ort.InferenceSession, emap: npt.ArrayLike) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        emap_arr = np.ascontiguousarray(emap, dtype=np.float32)
        if emap_arr.shape != (LATENT_SIZE, LATENT_SIZE) or not np.all(np.isfinite(emap_arr)):
            raise ModelContractError(f"inswapper emap must be a finite 512x512 matrix, got {emap_arr.shape}.")
        self.session = session
        self.emap: FloatArray = emap_arr
        by_name = {i.name: i for i in session.get_inputs()}
        # The fp16 file is usually float32 at its edges; trust the session, not the file name.
        self.target_dtype: type[np.floating[Any]] = _FLOAT_TYPES[by_name[TARGET_NAME].type]
        self.source_dtype: type[np.floating[Any]] = _FLOAT_TYPES[by_name[SOURCE_NAME].type]
        self.output_name: str = session.get_outputs()[0].name
        self._target: npt.NDArray[Any] = np.zeros(TARGET_SHAPE, dtype=self.target_dtype)
        self._source: npt.NDArray[Any] = np.zeros(SOURCE_SHAPE, dtype=self.source_dtype)
        self._feeds = {TARGET_NAME: self._target, SOURCE_NAME: self._source}
        # Per-channel scratch: whole contiguous planes convert at memory speed, where the same maths
        # through transposed HWC views takes twice as long.
        self._planes_u8 = [np.empty((CROP_SIZE, CROP_SIZE), dtype=np.uint8) for _ in range(3)]
        self._plane_f32: FloatArray = np.empty((CROP_SIZE, CROP_SIZE), dtype=np.float32)

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory) -> InSwapper:
        """Open the session (which reports a missing/corrupt file), check it, then read the emap."""
        p = Path(path)
        session = factory.create(p, label=p.name)
        try:
            cls.check_contract(session.get_inputs(), session.get_outputs())
        except ModelContractError as err:
            raise ModelContractError(f"{p.name}: {err.message}", hint=err.hint) from err
        return cls(session, read_emap_cached(p))

    @staticmethod
    def check_contract(inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        by_name = {i.name: i for i in inputs}
        got = (
            " + ".join(f"{i.name}{_fmt_shape(i.shape)}" for i in inputs)
            + " -> "
            + ", ".join(_fmt_shape(o.shape) for o in outputs)
        )
        ok = (
            len(inputs) == 2
            and len(outputs) == 1
            and TARGET_NAME in by_name
            and SOURCE_NAME in by_name
            and list(by_name[TARGET_NAME].shape or []) == TARGET_SHAPE
            and list(by_name[SOURCE_NAME].shape or []) == SOURCE_SHAPE
            and list(outputs[0].shape or []) == TARGET_SHAPE
        )
        if not ok:
            raise ModelContractError(f"not an inswapper model: expected {CONTRACT_TEXT}, got {got}.")
        for node in (by_name[TARGET_NAME], by_name[SOURCE_NAME], outputs[0]):
            if node.type not in _FLOAT_TYPES:
                raise ModelContractError(f"inswapper: {node.name} must be float or float16, got {node.type}.")

    def latent(self, normed_embedding: npt.ArrayLike) -> FloatArray:
        """(1, 512) float32 source latent: embedding @ emap, renormalised (insightface; FaceFusion
        skips the renormalisation)."""
        e = np.asarray(normed_embedding, dtype=np.float32).reshape(1, LATENT_SIZE)
        lat = e @ self.emap
        norm = float(np.linalg.norm(lat))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"source embedding maps to a latent with norm {norm}")
        return np.asarray(lat / np.float32(norm), dtype=np.float32)

    def swap(self, crop_bgr: ImageBGR, latent: npt.ArrayLike, out: ImageBGR | None = None) -> ImageBGR:
        """The swapped (128, 128, 3) uint8 BGR crop; written into `out` when given, else a new array."""
        self._load_target(crop_bgr)
        self._load_source(latent)
        return self._decode(self._infer(), out)

    def _load_target(self, crop_bgr: ImageBGR) -> None:
        if crop_bgr.shape != (CROP_SIZE, CROP_SIZE, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(
                f"expected a ({CROP_SIZE}, {CROP_SIZE}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}"
            )
        # BGR -> RGB, HWC -> CHW, x / 255 into the reused blob (float32 maths like
        # cv2.dnn.blobFromImage, cast on store for a float16 input).
        if self._target.dtype == np.float32:
            # Imported here: numba (1.3 s, ~200 MB) loads only where the CPU path runs this.
            from models.ops.pixel_kernels import bgr_into_rgb_planes

            bgr_into_rgb_planes(crop_bgr, self._target, 1.0 / 255.0)  # one pass, without the GIL
            return
        b, g, r = cv2.split(crop_bgr, self._planes_u8)
        for channel, plane in enumerate((r, g, b)):
            np.multiply(plane, np.float32(1.0 / 255.0), out=self._target[0, channel])

    def _load_source(self, latent: npt.ArrayLike) -> None:
        lat = np.asarray(latent)
        if lat.size != LATENT_SIZE:
            raise ValueError(f"expected a (1, {LATENT_SIZE}) latent, got shape {lat.shape}")
        np.copyto(self._source, lat.reshape(SOURCE_SHAPE), casting="same_kind")

    def _infer(self) -> npt.NDArray[Any]:
        """(1, 3, 128, 128) RGB prediction in [0, 1] (float32 or float16, as the model declares)."""
        return np.asarray(self.session.run([self.output_name], self._feeds)[0])

    def _decode(self, pred: npt.NDArray[Any], out: ImageBGR | None) -> ImageBGR:
        dst = np.empty((CROP_SIZE, CROP_SIZE, 3), dtype=np.uint8) if out is None else out
        if dst.shape != (CROP_SIZE, CROP_SIZE, 3) or dst.dtype != np.uint8:
            raise ValueError(f"out must be a ({CROP_SIZE}, {CROP_SIZE}, 3) uint8 array")
        if pred.dtype == np.float32 and pred.shape == (1, 3, CROP_SIZE, CROP_SIZE):
            # One pass without the GIL; the same values as the numpy steps below.
            from models.ops.pixel_kernels import rgb_planes_into_bgr

            if not rgb_planes_into_bgr(pred, dst, 255.0):
                raise _non_finite_output()
            return dst
        if not np.isfinite(pred).all():
            raise _non_finite_output()
        # NCHW RGB -> HWC BGR, x255 in float32 (also for a float16 output), clip, truncate to uint8
        # exactly like insightface's np.clip(255 * x, 0, 255).astype(np.uint8); plane by plane.
        scratch = self._plane_f32
        for channel, plane in zip((2, 1, 0), self._planes_u8, strict=True):  # B, G, R
            np.multiply(pred[0, channel], np.float32(255.0), out=scratch)
            np.clip(scratch, 0.0, 255.0, out=scratch)
            np.copyto(plane, scratch, casting="unsafe")
        if dst.flags.c_contiguous:
            merged = cv2.merge(self._planes_u8, dst=dst)
            if merged is not dst:  # OpenCV allocated instead of writing into `out`
                np.copyto(dst, merged)
        else:  # cv2 refuses some layouts (Fortran order) as dst: merge, then copy
            np.copyto(dst, cv2.merge(self._planes_u8))
        return dst
