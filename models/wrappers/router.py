"""Pick the wrapper class from a model's signature, and refuse a file loaded in the wrong role.

Identification is deliberately loose (like insightface's router: input/output counts and shapes) so
the error can say what a wrong file *looks like*; the wrapper classes then check their contract
strictly. Nothing here returns None for "no match": a mismatch raises ModelContractError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import onnxruntime as ort

from models.errors import ModelContractError
from models.runtime.session import SessionFactory
from models.wrappers.arcface import ArcFace
from models.wrappers.scrfd import SCRFD

Contract = Literal[
    "detector/scrfd",
    "recognizer/arcface",
    "swapper",
    "landmarks/2d106",
    "landmarks/1k3d68",
    "unknown",
]

# What each loader needs, in the words of the error message.
_EXPECTED: Mapping[Contract, tuple[str, str]] = MappingProxyType(
    {
        "detector/scrfd": (
            "a face detector",
            "one image input [1,3,H,W] and 9 outputs (scores, boxes, 5 landmarks for strides 8/16/32)",
        ),
        "recognizer/arcface": ("a face recogniser", "one input [N,3,112,112] and one output [N,512]"),
        "swapper": (
            "a face swapper",
            "inputs target[1,3,S,S] + source (identity vector or source picture) and an output [1,3,S,S]",
        ),
    }
)
_ROLE_HINT = "Check which file is configured for this role."


def _dims(shape: Sequence[Any] | None) -> list[int | None]:
    return [d if isinstance(d, int) and d > 0 else None for d in (shape or [])]


def _fmt(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in _dims(shape)) + "]"


def identify_contract(session: ort.InferenceSession) -> Contract:
    """Which known contract the session's signature matches ("unknown" if none)."""
    inputs = session.get_inputs()
    outputs = session.get_outputs()
    names = {i.name for i in inputs}
    if len(inputs) == 2 and names == {"target", "source"} and len(outputs) >= 1:
        return "swapper"  # HyperSwap adds a mask output after the swap
    if len(inputs) != 1:
        return "unknown"
    ishape = _dims(inputs[0].shape)
    if len(ishape) != 4 or ishape[1] not in (3, None):
        return "unknown"
    # insightface routes any >= 5-output image model to SCRFD; the real variants have 6/9 (3
    # strides) or 10/15 (5 strides) outputs.
    if len(outputs) in (6, 9, 10, 15):
        return "detector/scrfd"
    if len(outputs) != 1:
        return "unknown"
    oshape = _dims(outputs[0].shape)
    last = oshape[-1] if oshape else None
    hw = (ishape[2], ishape[3])
    if hw == (112, 112) and last == 512:
        return "recognizer/arcface"
    if hw == (192, 192) and last == 212:
        return "landmarks/2d106"
    if hw == (192, 192) and last == 3309:
        return "landmarks/1k3d68"
    return "unknown"


def describe(session: ort.InferenceSession) -> str:
    """What the file looks like, for error messages ("a face detector (SCRFD, 9 outputs)")."""
    kind = identify_contract(session)
    if kind == "detector/scrfd":
        return f"a face detector (SCRFD, {len(session.get_outputs())} outputs)"
    if kind == "recognizer/arcface":
        return "a face recogniser (ArcFace, 512-d embedding)"
    if kind == "swapper":
        size = _dims(session.get_outputs()[0].shape)[-1]
        return f"a face swapper ({size or '?'} px)"
    if kind == "landmarks/2d106":
        return "a 106-point landmark model (2d106det)"
    if kind == "landmarks/1k3d68":
        return "a 68-point 3D landmark model (1k3d68)"
    ins = " + ".join(f"{i.name}{_fmt(i.shape)}" for i in session.get_inputs())
    outs = ", ".join(_fmt(o.shape) for o in session.get_outputs())
    return f"an unrecognised model (inputs {ins or 'none'}; outputs {outs or 'none'})"


def open_for_role(
    path: Path | str,
    factory: SessionFactory,
    want: Contract,
    run_shapes: Sequence[Sequence[int]] | None = None,
    expected: str | None = None,
) -> tuple[Path, ort.InferenceSession]:
    """The session of `path`, refused with a message saying what it looks like when it does not
    match the `want`ed kind. expected: the wanted contract in words, where the caller knows it
    more precisely than the kind (a swapper family's sizes)."""
    p = Path(path)
    session = factory.create(p, label=p.name, run_shapes=run_shapes)
    check_role(p, session, want, expected)
    return p, session


def check_role(
    path: Path, session: ort.InferenceSession, want: Contract, expected: str | None = None
) -> None:
    """ModelContractError saying what `path` looks like, when its session is not of the `want`ed kind."""
    if identify_contract(session) != want:
        role, generic = _EXPECTED[want]
        raise ModelContractError(
            f"{path.name} is not {role}: expected {expected or generic}; this file looks like "
            f"{describe(session)}.",
            hint=_ROLE_HINT,
        )


def named_error(path: Path, err: ModelContractError) -> ModelContractError:
    return ModelContractError(f"{path.name}: {err.message}", hint=err.hint or _ROLE_HINT)


def load_detector(path: Path | str, factory: SessionFactory, **kw: Any) -> SCRFD:
    """An SCRFD detector; `kw` go to SCRFD (input_size, swap_rb, score_threshold, nms_threshold)."""
    width, height = kw.get("input_size", (640, 640))
    # SCRFD's input height and width are dynamic: TensorRT builds its engine for the size given here.
    p, session = open_for_role(path, factory, "detector/scrfd", [(1, 3, int(height), int(width))])
    try:
        return SCRFD(session, **kw)
    except ModelContractError as err:
        raise named_error(p, err) from err


def load_recognizer(path: Path | str, factory: SessionFactory) -> ArcFace:
    p, session = open_for_role(path, factory, "recognizer/arcface")
    try:
        return ArcFace(session)
    except ModelContractError as err:
        raise named_error(p, err) from err
