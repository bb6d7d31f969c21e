"""inswapper_128 face swapper (fp32 and fp16 files).

Contract (docs/model-contracts.md, "Swapper: inswapper_128"): inputs `target` [1,3,128,128] (the arcface_128
aligned crop, RGB, x / 255) and `source` [1,512] (latent = normed_embedding @ emap, renormalised);
output `output` [1,3,128,128] RGB in [0, 1]. `emap` is not an input: it is the graph's last
initializer, read from the file once at load time.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import platformdirs
from onnx import numpy_helper

from models.errors import ModelContractError
from models.runtime.session import SessionFactory
from models.types import FloatArray, SourceFace
from models.wrappers.swappers.base import EMBEDDING_SIZE, FaceSwapper
from models.wrappers.swappers.facts import SwapperFacts

log = logging.getLogger(__name__)

CROP_SIZE = 128
LATENT_SIZE = EMBEDDING_SIZE
_EMAP_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


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


class InSwapper(FaceSwapper):
    """inswapper_128 (fp32 and fp16 files): the identity enters through the file's own emap."""

    facts = SwapperFacts("inswapper", CROP_SIZE, "arcface_128", identity="emap", output="unit")
    label = "inswapper"

    def __init__(self, session: ort.InferenceSession, emap: npt.ArrayLike) -> None:
        super().__init__(session)
        emap_arr = np.ascontiguousarray(emap, dtype=np.float32)
        if emap_arr.shape != (LATENT_SIZE, LATENT_SIZE) or not np.all(np.isfinite(emap_arr)):
            raise ModelContractError(f"inswapper emap must be a finite 512x512 matrix, got {emap_arr.shape}.")
        self.emap: FloatArray = emap_arr

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

    def identity(self, face: SourceFace) -> FloatArray:
        return self.latent(face.embedding)

    def latent(self, normed_embedding: npt.ArrayLike) -> FloatArray:
        """(1, 512) float32 source latent: embedding @ emap, renormalised (insightface; FaceFusion
        skips the renormalisation)."""
        e = np.asarray(normed_embedding, dtype=np.float32).reshape(1, LATENT_SIZE)
        lat = e @ self.emap
        norm = float(np.linalg.norm(lat))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"source embedding maps to a latent with norm {norm}")
        return np.asarray(lat / np.float32(norm), dtype=np.float32)


__all__ = ["CROP_SIZE", "LATENT_SIZE", "InSwapper", "emap_cache_path", "read_emap", "read_emap_cached"]
