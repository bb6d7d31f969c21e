"""The control panel's analyser wrapper: the active face's identity on every target, and the
capture thread's preparation passed through to the analyser it wraps."""

from __future__ import annotations

import numpy as np

from realtime.core.contracts import FramePlan, PreparingAnalyser, SwapTarget
from realtime.core.settings import Settings
from realtime.wiring.gallery_stages import ActiveFace, ActiveFaceAnalyser

KPS = np.zeros((5, 2), dtype=np.float32)


class _Preparing:
    def __init__(self) -> None:
        self.received: list[object | None] = []

    def prepare(self, image: np.ndarray) -> object | None:
        return ("grey", image.shape)

    def analyse(self, image, ts, s, *, prepared=None):  # type: ignore[no-untyped-def]
        self.received.append(prepared)
        return FramePlan([SwapTarget(KPS, 1.0)])


class _Plain:
    def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
        return FramePlan([SwapTarget(KPS, 1.0)])


def test_the_wrapper_passes_the_preparation_through_and_sets_the_active_face() -> None:
    inner, active = _Preparing(), ActiveFace(2)
    wrapper = ActiveFaceAnalyser(inner, active)
    image = np.zeros((4, 6, 3), dtype=np.uint8)
    assert isinstance(wrapper, PreparingAnalyser)  # so the engine's capture thread prepares for it
    prepared = wrapper.prepare(image)
    assert prepared == ("grey", (4, 6, 3))
    plan = wrapper.analyse(image, 0.0, Settings(), prepared=prepared)
    assert inner.received == [prepared]
    assert [t.identity for t in plan.targets] == [2]
    active.set(None)
    plan = wrapper.analyse(image, 0.0, Settings())
    assert plan.targets == [] and plan.passthrough == 1


def test_a_plain_inner_analyser_gets_nothing_prepared() -> None:
    wrapper = ActiveFaceAnalyser(_Plain(), ActiveFace(0))
    image = np.zeros((4, 6, 3), dtype=np.uint8)
    assert wrapper.prepare(image) is None
    assert len(wrapper.analyse(image, 0.0, Settings(), prepared=None).targets) == 1
