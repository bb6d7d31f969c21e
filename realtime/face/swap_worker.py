"""The swap stage of a frame: each planned face through the per-face chain (realtime.face.chain).

Swapping and paste-back are stateless per frame and expensive, so several workers (each with its
own swapper, enhancer and mask sessions) run them on consecutive frames at once. A worker runs its
chain on one backend: the host's (OpenCV/numpy) or, when the pipeline runs on CUDA/TensorRT, the
device's (realtime.face.device_backend), with the very same steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from models.errors import ModelError
from models.ops.align import plausible_landmarks
from models.ops.device_ops import DeviceOps
from models.runtime.inference_service import ServiceClient
from models.runtime.session import SessionFactory
from models.types import ImageBGR
from models.wrappers.enhancers import CodeFormer
from models.wrappers.swappers.base import FaceSwapper
from realtime.core.contracts import FramePlan, SwapTarget, check_identity
from realtime.core.settings import MasksSettings, Settings
from realtime.core.watermark.embed import MarkRequest
from realtime.face.backend import FaceBackend, HostBackend
from realtime.face.chain import FaceJob, FaceStep, FrameJob, run_chain
from realtime.face.device_backend import DeviceBackend
from realtime.face.host.compositor import Compositor, MaskSettings
from realtime.face.host.enhancer import FaceEnhanceStage
from realtime.face.model_api import QualityModels
from realtime.face.privacy import CoverStep, covers_of
from realtime.face.source_face import SourceIdentity
from realtime.face.steps.blend import BlendStep
from realtime.face.steps.colour import ColourStep
from realtime.face.steps.enhance import EnhanceStep
from realtime.face.steps.masks import FaceMasks, MaskStep
from realtime.face.steps.paste import PasteStep
from realtime.face.steps.sharpen import SharpenStep
from realtime.face.steps.swap import SubmitStep, SwapStep

T = TypeVar("T")

log = logging.getLogger(__name__)


class StageUnavailableError(RuntimeError):
    """A quality stage switched on live could not load its model; the stage stays off.

    Deliberately not a FaceCastError: the engine reports it as a warning for the frame it
    happened on and keeps streaming, instead of stopping the run over an optional stage.
    """


class FaceSwapWorker:
    """Swap each planned face, finish it and paste it back, in place, inside the face's region only.

    identity: the source identity, or the run's identities in order (SwapTarget.identity indexes
    them: one latent each, computed once here). quality: where the enhancer and mask models come
    from; those the settings switch on are loaded when the worker is built, and a model switched
    on later is loaded once, at the first frame that needs it.

    factory: the pipeline's session factory. When it asks for CUDA/TensorRT (and the swapper really
    runs there), the chain runs on realtime.face.device_backend.DeviceBackend: the frame stays on
    the device from upload (or NVDEC picture) to download, the enhancer runs there too, and the
    host steps (masks, colour match, sharpening, kept corrections) touch small crops only.

    client / client_on_device: the engine's stream on the process's shared swapper service (its
    requests device tensors, or host arrays), so this worker's faces are batched with every other
    worker's and stream's; None: the swapper runs each face itself.
    `device_graphs` forces that choice (True: the device backend with the graphs even on the CPU
    provider, for tests; False: the host backend). Each frame on the device backend reports its
    host<->device transfers as timings["copies"].
    """

    def __init__(
        self,
        swapper: FaceSwapper,
        identity: SourceIdentity | Sequence[SourceIdentity],
        settings: Settings,
        quality: QualityModels | None = None,
        factory: SessionFactory | None = None,
        *,
        device_graphs: bool | None = None,
        client: ServiceClient | None = None,
        client_on_device: bool = False,
    ) -> None:
        identities = (identity,) if isinstance(identity, SourceIdentity) else tuple(identity)
        if not identities:
            raise ValueError("a swap worker needs at least one source identity")
        self._swapper = swapper
        latents = tuple(swapper.identity(i.source_face) for i in identities)
        self._identities = len(latents)
        layout = swapper.facts.layout
        self._mask_settings = _mask_settings(settings)
        self._mask_settings_from: object = settings.composite
        self._compositor = Compositor(self._mask_settings)
        self._quality = quality
        self._masks = FaceMasks(layout)
        self._enhancer: FaceEnhanceStage | None = None
        self._enhancer_name = "none"
        self._unavailable: dict[str, str] = {}  # model -> why it could not be loaded
        device_client = client if client is not None and client_on_device else None
        self._device = self._device_backend(swapper, latents, factory, device_graphs, device_client)
        if self._device is None and client is not None and not client_on_device:
            swapper.attach(client)  # the host path's model calls, batched with the process's
        self._backend: FaceBackend = (
            self._device if self._device is not None else HostBackend(swapper, latents)
        )
        # Run over every face first: the frame's faces go to the swapper together.
        self.first_steps: tuple[FaceStep, ...] = (SubmitStep(layout),)
        self.steps: tuple[FaceStep, ...] = (
            SwapStep(),
            MaskStep(self._masks),
            ColourStep(),
            BlendStep(),
            EnhanceStep(),
            SharpenStep(),
            PasteStep(),
        )
        self._cover = CoverStep(layout)  # the privacy fallback, after the swaps
        if quality is not None:
            # Load what the settings ask for now, where a failure stops the run with the store's
            # message. Without a loader the first frame that needs one reports it (see _load).
            self._sync_models(settings, live=False)

    @property
    def identities(self) -> int:
        return self._identities

    @property
    def device_path(self) -> DeviceBackend | None:
        """The device backend, when this worker runs its chain on one (see the class doc)."""
        return self._device

    @property
    def enhancer(self) -> FaceEnhanceStage | None:
        """The enhance stage in use (None when enhancer.model is "none")."""
        return self._enhancer

    @property
    def marks_on_device(self) -> bool:
        """True on the device path: a frame's watermark is added there, before its download."""
        return self._device is not None

    def apply(
        self,
        image: ImageBGR,
        plan: FramePlan,
        settings: Settings,
        *,
        device_picture: object | None = None,
        mark: MarkRequest | None = None,
    ) -> dict[str, float]:
        """Swap the plan's faces into `image` in place; the ms of each step that ran (see
        realtime.face.chain). device_picture: the frame's NV12 picture still on the device, used
        instead of an upload where the device backend can bind it. mark: the frame's watermark,
        added on the device where the frame is there (`mark.done` then says so)."""
        if settings.composite is not self._mask_settings_from:  # (the same object while unchanged)
            self._mask_settings_from = settings.composite
            mask_settings = _mask_settings(settings)
            if mask_settings != self._mask_settings:
                self._mask_settings = mask_settings
                self._compositor = Compositor(mask_settings)
        self._sync_models(settings, live=True)
        n = self._identities
        faces = [
            FaceJob(
                t,
                check_identity(t, n),
                check_identity(t, n, t.previous_identity) if t.cross_fading else None,
            )
            for t in self._plausible(plan.targets)
        ]
        timings = {"swap": 0.0, "paste": 0.0}
        frame = FrameJob(
            image, settings, self._mask_config(settings.masks), self._compositor, self._enhancer, timings
        )
        covers = [
            (self._cover, FaceJob(SwapTarget(c.kps, c.strength, c.track_id), 0, None))
            for c in covers_of(plan)
            if c.strength > 0.0 and plausible_landmarks(c.kps)
        ]
        self._backend.begin(image, timings, self._compositor, device_picture, mark)
        run_chain(self.first_steps, self.steps, self._backend, faces, frame, covers)
        if self._device is not None:
            timings["copies"] = float(self._device.last_copies.total)
        return timings

    # ----------------------------------------------------------------------------- internals

    @staticmethod
    def _plausible(targets: Sequence[SwapTarget]) -> list[SwapTarget]:
        """The targets whose landmarks can be aligned; the others pass through this frame."""
        kept = [t for t in targets if plausible_landmarks(t.kps)]
        if len(kept) != len(targets):
            log.debug("skipped %d face(s) with implausible landmarks", len(targets) - len(kept))
        return kept

    @staticmethod
    def _device_backend(
        swapper: FaceSwapper,
        latents: Sequence[npt.NDArray[np.float32]],
        factory: SessionFactory | None,
        forced: bool | None,
        client: ServiceClient | None,
    ) -> DeviceBackend | None:
        if forced and factory is None:
            raise ValueError("device_graphs=True needs the session factory")
        if forced is False or factory is None or not DeviceBackend.supports(swapper):
            return None
        if forced is None and (
            factory.device_type == "cpu" or SessionFactory.device_type_of(swapper.session) == "cpu"
        ):
            return None  # the CPU provider (or CUDA that did not load): OpenCV is much faster there
        ops = DeviceOps(factory, use_graphs=True if forced else None)
        return DeviceBackend(swapper, latents, ops, client)

    def _sync_models(self, settings: Settings, *, live: bool) -> None:
        """Make the loaded quality models match the settings (a no-op on an unchanged frame)."""
        want = settings.enhancer.model
        if want != self._enhancer_name:
            self._enhancer = None
            self._enhancer_name = want
            if want != "none":
                restorer = self._load(want, lambda: self._need_quality().restorer(want), live)
                self._enhancer = None if restorer is None else FaceEnhanceStage(restorer)
        restorer = None if self._enhancer is None else self._enhancer.restorer
        if isinstance(restorer, CodeFormer) and restorer.fidelity != settings.enhancer.fidelity:
            restorer.set_fidelity(settings.enhancer.fidelity)
        masks = settings.masks
        if masks.occlusion and self._masks.occluder is None:
            self._masks.occluder = self._load("xseg_1", lambda: self._need_quality().occluder(), live)
        if masks.regions and self._masks.parser is None:
            self._masks.parser = self._load("bisenet_resnet_34", lambda: self._need_quality().parser(), live)

    def _mask_config(self, masks: MasksSettings) -> MasksSettings:
        """The masks this worker can run: one whose model failed to load (already reported) is off."""
        occlusion = masks.occlusion and self._masks.occluder is not None
        regions = masks.regions and self._masks.parser is not None
        if (occlusion, regions) == (masks.occlusion, masks.regions):
            return masks
        return replace(masks, occlusion=occlusion, regions=regions)

    def _need_quality(self) -> QualityModels:
        if self._quality is None:
            raise ModelError(
                "This swap worker was built without enhancer/mask models.",
                hint="Build it with a QualityModels loader (realtime.wiring.face_swap does).",
            )
        return self._quality

    def _load(self, name: str, load: Callable[[], T], live: bool) -> T | None:
        """Load a quality model. At build time a failure is fatal (as for the swapper); during a
        run it turns that stage off with one warning rather than ending the stream."""
        if name in self._unavailable:
            return None
        try:
            return load()
        except ModelError as err:
            if not live:
                raise
            self._unavailable[name] = err.user_message()
            raise StageUnavailableError(f"{name} is off for this run: {err.user_message()}") from err


def _mask_settings(settings: Settings) -> MaskSettings:
    return MaskSettings(erode_ratio=settings.composite.erode_ratio, blur_ratio=settings.composite.blur_ratio)


__all__ = ["FaceSwapWorker", "StageUnavailableError"]
