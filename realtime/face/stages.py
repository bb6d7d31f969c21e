"""The two face stages of a frame: analyse (sequential) and swap + composite (parallel workers).

Analysis — detection, tracking, smoothing, target choice — needs frames in order and carries state
from one frame to the next, so one analyser sees every frame. Swapping and paste-back are
stateless per frame and expensive, so several workers (each with its own swapper, enhancer and
mask sessions) run them on consecutive frames at once.

Per face, a worker runs: crop -> swap -> masks (box ∧ occlusion ∧ regions ∧ not-mouth) -> colour
match -> [enhance in FFHQ space] -> sharpen -> one region-limited paste. Each step that runs
reports its own ms ("swap", "mask.occlusion", "mask.regions", "mask.mouth", "colour", "enhance" /
"enhance.reuse", "sharpen", "paste"), summed over the frame's faces.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from models.errors import FaceCastError, ModelError, ModelOutputError
from models.ops.align import Matrix2x3, estimate_norm, plausible_landmarks, warp_paste_crop
from models.ops.device_ops import DeviceOps
from models.runtime.session import SessionFactory
from models.types import Detection, ImageBGR
from models.wrappers.enhancers import CodeFormer
from models.wrappers.inswapper import InSwapper
from models.wrappers.scrfd import SCRFD
from realtime.core.contracts import FramePlan, SwapTarget, check_identity
from realtime.core.settings import MasksSettings, Settings, SettingsError
from realtime.face.device_path import DeviceFacePath, HostFinish
from realtime.face.model_api import AnalysisModels, FaceDetector, QualityModels, embedding_distance
from realtime.face.source_face import SourceIdentity
from realtime.face.steps.compositor import (
    Compositor,
    MaskArray,
    MaskSettings,
    colour_transfer,
    cross_fade,
    paste_region,
    unsharp_mask,
)
from realtime.face.steps.enhance import FaceEnhanceStage
from realtime.face.steps.masks import FaceMask, FaceMasks
from realtime.face.targets import IdentityMapSelector, TargetSelector
from realtime.face.tracker import FaceTracker, TrackedFace

T = TypeVar("T")

log = logging.getLogger(__name__)


class StageUnavailableError(RuntimeError):
    """A quality stage switched on live could not load its model; the stage stays off.

    Deliberately not a FaceCastError: the engine reports it as a warning for the frame it
    happened on and keeps streaming, instead of stopping the run over an optional stage.
    """


class FaceAnalyser:
    """Detect every K frames, track and smooth in between, choose the target faces."""

    def __init__(
        self,
        models: AnalysisModels,
        settings: Settings,
        reference_embedding: npt.NDArray[np.float32] | None = None,
        mapped_references: Sequence[npt.NDArray[np.float32]] = (),
    ) -> None:
        """mapped_references: for swap.target "mapped", the embedding of each `--map` reference
        photo; the face matching reference k (0-based) is swapped with identity k + 1."""
        self._models = models
        self._reference = reference_embedding
        self._mapped = tuple(mapped_references)
        self._settings = settings
        self._detector: FaceDetector = models.detector
        if isinstance(self._detector, SCRFD):  # shared models may carry another run's live threshold
            self._detector.score_threshold = settings.detector.threshold
        self._tracker = self._new_tracker(settings)
        self._selector = self._new_selector(settings)
        self._embeddings: dict[int, npt.NDArray[np.float32]] = {}
        # Selection weight and identity of each track chosen now or fading out after it was chosen:
        # a change of target fades over tracker.fade_frames instead of popping.
        self._selection: dict[int, _Chosen] = {}
        self._timings: dict[str, float] = {}
        self._current_image: ImageBGR = np.zeros((1, 1, 3), dtype=np.uint8)

    def _new_tracker(self, settings: Settings) -> FaceTracker:
        return FaceTracker.from_settings(self._timed_detect, settings)

    def _new_selector(self, settings: Settings) -> TargetSelector | IdentityMapSelector:
        if settings.swap.target == "mapped":
            if not self._mapped:
                raise SettingsError(
                    "Setting 'swap.target' is 'mapped' but no identity mapping was given.",
                    hint="Pass --map REF_PHOTO=SOURCE_PHOTO (repeatable).",
                )
            return IdentityMapSelector(
                self._mapped, settings.swap.reference_threshold, max_missed=settings.tracker.max_missed
            )
        if settings.swap.target == "reference" and self._reference is None:
            raise SettingsError(
                "Setting 'swap.target' is 'reference' but no reference photo was given.",
                hint="Pass --reference PHOTO (a photo of the person whose face is swapped).",
            )
        return TargetSelector(
            settings.swap.target,
            reference_embedding=self._reference,
            threshold=settings.swap.reference_threshold,
            max_missed=settings.tracker.max_missed,
        )

    def _timed_detect(self, image: ImageBGR) -> list[Detection]:
        t0 = time.perf_counter()
        faces = self._detector.detect(image, max_faces=self._settings.detector.max_faces)
        self._timings["detect"] = _ms(t0)
        return faces

    def _embed(self, face: TrackedFace) -> npt.NDArray[np.float32]:
        cached = self._embeddings.get(face.track_id)
        if cached is None or face.detected:
            image = self._current_image
            cached = self._models.recognizer.embed(image, face.raw_kps)
            self._embeddings[face.track_id] = cached
        return cached

    def reconfigure(self, settings: Settings) -> None:
        """Apply a live settings change that needs no model reload."""
        old = self._settings
        self._settings = settings
        if old.tracker != settings.tracker or old.detector.interval != settings.detector.interval:
            # Keeps the tracks (ids, smoothing state): a slider move must not re-lock the target.
            self._tracker.reconfigure(settings.tracker, settings.detector.interval)
        if old.detector.threshold != settings.detector.threshold:
            # Live, like the sliders: a reload would reset every track (the swap blinks, and in
            # "largest" mode the target may jump to another face).
            self._tracker.score_threshold = settings.detector.threshold
            if isinstance(self._detector, SCRFD):
                self._detector.score_threshold = settings.detector.threshold
        if old.swap.target != settings.swap.target:
            self._selector = self._new_selector(settings)  # a new way of choosing: choose again
            return
        # Everything else in place, keeping the lock: rebuilding the selector for a threshold
        # slider or a swap-model change moved the swap to whoever was largest at that moment.
        if old.swap.reference_threshold != settings.swap.reference_threshold:
            self._selector.threshold = settings.swap.reference_threshold
        if old.tracker.max_missed != settings.tracker.max_missed:
            # A selector giving a face up after fewer lost frames than the tracker keeps it could
            # jump to another person in "largest" mode.
            self._selector.max_missed = settings.tracker.max_missed

    def prepare(self, image: ImageBGR) -> object | None:
        """What `analyse` can take ready-made for this picture (the flow's small grey copy), made on
        another thread while the analysis works on the frame before. Safe to call from any thread."""
        return self._tracker.prepare(image)

    def analyse(
        self, image: ImageBGR, timestamp: float, settings: Settings, *, prepared: object | None = None
    ) -> FramePlan:
        """The plan for this frame. `prepared`: this analyser's `prepare(image)`, made ahead."""
        if settings is not self._settings:
            self.reconfigure(settings)
        self._timings = {}
        self._current_image = image
        t0 = time.perf_counter()
        flow_grey = prepared if isinstance(prepared, np.ndarray) else None
        faces = self._tracker.update(image, timestamp, flow_grey=flow_grey)
        track_ms = _ms(t0) - self._timings.get("detect", 0.0)
        t1 = time.perf_counter()
        cut = self._tracker.cut
        if cut:
            # A new shot: the locked target is gone with the old tracks; waiting for it to be
            # found again near where it was (regain) left the new shot unswapped for a second.
            self._selector.new_shot()
            self._selection = {}
        if isinstance(self._selector, IdentityMapSelector):
            chosen = [(face, k + 1) for face, k in self._selector.select(faces, self._embed)]
        else:
            chosen = [(face, 0) for face in self._selector.select(faces, self._embed)]
        live_ids = {f.track_id for f in faces}
        for stale in [k for k in self._embeddings if k not in live_ids]:
            del self._embeddings[stale]
        plan = FramePlan(timings=dict(self._timings))
        plan.timings["track"] = track_ms
        plan.timings["select"] = _ms(t1)
        plan.faces = len(faces)
        fade = settings.tracker.fade_frames
        planned: set[int] = set()
        for face, selected in self._fade_selection(chosen, faces, fade, fresh=cut):
            planned.add(face.track_id)
            weight = face.swap_weight * selected.weight
            # Landmarks no similarity can align pass through (the worker would skip them): counted
            # as passed through, not as swapped.
            if weight > 0.0 and plausible_landmarks(face.kps):
                plan.targets.append(
                    SwapTarget(
                        face.kps,
                        weight,
                        face.track_id,
                        selected.identity,
                        previous_identity=selected.previous,
                        mix=selected.mix,
                    )
                )
            elif weight > 0.0 or face.lost_frames == 0:
                # (A face faded out because the detector lost it is not left alone on purpose.)
                plan.passthrough += 1
        # Faces the tracker itself passes through (below the detector threshold, tracking not
        # trusted) count as passed through whether or not they were chosen: "largest" no longer
        # chooses them, and the count is how a user learns why a face was left alone.
        # (A face the detector lost, fading as it leaves the picture, is not one of them.)
        plan.passthrough += sum(
            1 for f in faces if f.track_id not in planned and f.swap_weight == 0.0 and f.lost_frames == 0
        )
        return plan

    def _fade_selection(
        self,
        chosen: Sequence[tuple[TrackedFace, int]],
        faces: Sequence[TrackedFace],
        fade_frames: int,
        *,
        fresh: bool = False,
    ) -> list[tuple[TrackedFace, _Chosen]]:
        """The chosen faces with their selection weight, ramping up, plus the faces chosen before
        and no longer, ramping down while still in view (the reference face turned out to be
        someone else, the locked target handed over to another). A face given another identity
        (mapped mode) cross-fades into it over the same number of frames. `fresh`: a scene cut, where a
        choice takes effect at once."""
        step = 1.0 if fade_frames <= 0 else 1.0 / fade_frames
        present = {face.track_id: face for face in faces}
        picked = {face.track_id: (face, identity) for face, identity in chosen}
        out: list[tuple[TrackedFace, _Chosen]] = []
        state: dict[int, _Chosen] = {}
        for track_id, (face, identity) in picked.items():
            before = self._selection.get(track_id)
            if before is None:
                # A face chosen since its track began needs no second fade-in: the tracker fades it in.
                weight = 1.0 if fresh or face.swap_weight < 1.0 else step
                now = _Chosen(weight, identity)
            else:
                now = before.step_to(identity, step)
            state[track_id] = now
            out.append((face, now))
        for track_id, before in self._selection.items():
            if track_id in picked or track_id not in present:
                continue
            leaving = before.fade_out(step)
            if leaving.weight > 0.0:
                state[track_id] = leaving
                out.append((present[track_id], leaving))
        self._selection = state
        return out


@dataclass(frozen=True, slots=True)
class _Chosen:
    """A chosen face's selection weight (0..1) and identity; `previous`/`mix` while it cross-fades
    from another identity (`mix`: the new identity's share)."""

    weight: float
    identity: int
    previous: int | None = None
    mix: float = 1.0

    def step_to(self, identity: int, step: float) -> _Chosen:
        weight = _settled(self.weight + step)
        if identity != self.identity:
            if self.previous is not None and identity == self.previous:
                # Changed back mid-fade: the cross-fade runs backwards from where it is.
                mix = _settled(1.0 - self.mix + step)
                return _Chosen(weight, identity, None if mix == 1.0 else self.identity, mix)
            # A new cross-fade starts from whichever identity shows most now.
            shown = self.identity if self.previous is None or self.mix >= 0.5 else self.previous
            mix = _settled(step)
            return _Chosen(weight, identity, None if mix == 1.0 else shown, mix)
        if self.previous is None:
            return _Chosen(weight, identity)
        mix = _settled(self.mix + step)
        return _Chosen(weight, identity, None if mix == 1.0 else self.previous, mix)

    def fade_out(self, step: float) -> _Chosen:
        return _Chosen(self.weight - step, self.identity, self.previous, self.mix)


def _settled(share: float) -> float:
    """A share that a running sum of 1/fade_frames brought to 1 (0.9999999999999999 for 6, 7, 10
    ... frames: the fade took a frame more, swapping twice for nothing), capped at 1."""
    return 1.0 if share >= 1.0 - 1e-9 else share


class FaceSwapWorker:
    """Swap each planned face, finish it and paste it back, in place, inside the face's region only.

    identity: the source identity, or the run's identities in order (SwapTarget.identity indexes
    them: one latent each, computed once here). quality: where the enhancer and mask models come
    from; those the settings switch on are loaded when the worker is built, and a model switched
    on later is loaded once, at the first frame that needs it.

    factory: the pipeline's session factory. When it asks for CUDA/TensorRT (and the swapper really
    runs there), every frame goes through realtime.face.device_path.DeviceFacePath: the frame stays on
    the device from upload (or NVDEC picture) to download, the enhancer runs there too, and the
    host steps (extra masks, colour match, sharpening, kept corrections) touch small crops only
    (see HostFinish). `device_graphs` forces that choice
    (True: the device path with the graphs even on the CPU provider, for tests; False: OpenCV).
    Each frame on the device path reports its host<->device transfers as timings["copies"].
    """

    def __init__(
        self,
        swapper: InSwapper,
        identity: SourceIdentity | Sequence[SourceIdentity],
        settings: Settings,
        quality: QualityModels | None = None,
        factory: SessionFactory | None = None,
        *,
        device_graphs: bool | None = None,
    ) -> None:
        identities = (identity,) if isinstance(identity, SourceIdentity) else tuple(identity)
        if not identities:
            raise ValueError("a swap worker needs at least one source identity")
        self._swapper = swapper
        self._latents = tuple(swapper.latent(i.embedding) for i in identities)
        size = self._swapper.input_size
        self._size = size
        self._crop = np.zeros((size, size, 3), dtype=np.uint8)  # reused every face
        self._swapped = np.zeros((size, size, 3), dtype=np.uint8)
        self._swapped_before = np.zeros((size, size, 3), dtype=np.uint8)  # a face changing identity
        self._blurred: dict[int, ImageBGR] = {}  # sharpening scratch, per crop size
        self._mask_settings = _mask_settings(settings)
        self._mask_settings_from: object = settings.composite
        self._compositor = Compositor(self._mask_settings)
        self._said: set[str] = set()  # problems already logged (once each, not per frame)
        self._quality = quality
        self._masks = FaceMasks(size)
        self._enhancer: FaceEnhanceStage | None = None
        self._enhancer_name = "none"
        self._unavailable: dict[str, str] = {}  # model -> why it could not be loaded
        self._device = self._device_path(swapper, factory, device_graphs)
        if quality is not None:
            # Load what the settings ask for now, where a failure stops the run with the store's
            # message. Without a loader the first frame that needs one reports it (see _load).
            self._sync_models(settings, live=False)

    @property
    def identities(self) -> int:
        return len(self._latents)

    @property
    def device_path(self) -> DeviceFacePath | None:
        """The device face path, when this worker has one (see the class doc)."""
        return self._device

    @property
    def enhancer(self) -> FaceEnhanceStage | None:
        """The enhance stage in use (None when enhancer.model is "none")."""
        return self._enhancer

    def apply(
        self, image: ImageBGR, plan: FramePlan, settings: Settings, *, device_picture: object | None = None
    ) -> dict[str, float]:
        if settings.composite is not self._mask_settings_from:  # (the same object while unchanged)
            self._mask_settings_from = settings.composite
            mask_settings = _mask_settings(settings)
            if mask_settings != self._mask_settings:
                self._mask_settings = mask_settings
                self._compositor = Compositor(mask_settings)
        self._sync_models(settings, live=True)
        mask_config = self._mask_config(settings.masks)
        enhancer = self._enhancer
        comp = settings.composite
        timings = {"swap": 0.0, "paste": 0.0}
        if self._device is not None:
            for target in self._plausible(plan.targets):
                self._latent(target)  # the same error as the OpenCV path for a bad identity
            copies = self._device.apply(
                image,
                self._plausible(plan.targets),
                self._compositor,
                comp.opacity,
                timings,
                restorer=enhancer.restorer if enhancer is not None else None,
                blend=settings.enhancer.blend,
                every_n=settings.enhancer.every_n,
                picture=device_picture,
                finish=self._host_finish(image, mask_config, settings, timings),
            )
            timings["copies"] = float(copies.total)
            return timings
        keys: list[Hashable] = []
        for target in self._plausible(plan.targets):
            t0 = time.perf_counter()
            m = estimate_norm(target.kps, self._size)
            warp_paste_crop(image, m, self._size, out=self._crop)
            swapped = self._swapper.swap(self._crop, self._latent(target), out=self._swapped)
            if target.cross_fading:
                before = self._latent(target, target.previous_identity)
                cross_fade(
                    self._swapper.swap(self._crop, before, out=self._swapped_before),
                    swapped,
                    target.mix,
                    swapped,
                )
            timings["swap"] += _ms(t0)

            face = self._masks.build(
                image,
                m,
                target.kps,
                self._compositor.crop_mask(self._size, m),
                mask_config,
                timings,
                want_skin=comp.colour_match,
            )
            if comp.colour_match:
                t0 = time.perf_counter()
                np.copyto(swapped, colour_transfer(swapped, self._crop, face.skin))
                _add_ms(timings, "colour", t0)

            crop, m_paste, alpha, region = swapped, m, face.alpha, None
            if enhancer is not None and settings.enhancer.blend > 0.0:  # blend 0: the plain swap
                t0 = time.perf_counter()
                key = (target.track_id, target.identity) if target.track_id >= 0 else None
                if key is not None:
                    keys.append(key)
                try:
                    done = enhancer.enhance(
                        image,
                        target.kps,
                        swapped,
                        m,
                        face.alpha,
                        blend=settings.enhancer.blend,
                        every_n=settings.enhancer.every_n,
                        key=key,
                    )
                except ModelOutputError as exc:
                    # A broken restoration (NaN from an fp16 overflow) is neither pasted nor kept for
                    # reuse (it is refused before it is stored): this face gets the plain swap.
                    self._say_once(exc)
                else:
                    crop, m_paste, alpha = done.crop, done.m, done.mask
                    # The FFHQ crop is larger than the face; the mask is zero beyond the swap's square.
                    region = paste_region(image.shape, self._size, m)
                    _add_ms(timings, "enhance" if done.ran_model else "enhance.reuse", t0)

            if comp.sharpen > 0.0:
                self._sharpen(crop, comp.sharpen, timings)

            t0 = time.perf_counter()
            self._compositor.paste(
                image,
                crop,
                m_paste,
                opacity=comp.opacity * target.weight,
                inplace=True,
                mask=alpha,
                region=region,
            )
            timings["paste"] += _ms(t0)
        if enhancer is not None:
            enhancer.forget_except(keys)
        return timings

    # ----------------------------------------------------------------------------- internals

    def _say_once(self, exc: FaceCastError) -> None:
        text = exc.user_message()
        if text not in self._said:
            self._said.add(text)
            log.warning("%s The plain swap is used where that happens.", text)

    @staticmethod
    def _plausible(targets: Sequence[SwapTarget]) -> list[SwapTarget]:
        """The targets whose landmarks can be aligned; the others pass through this frame."""
        kept = [t for t in targets if plausible_landmarks(t.kps)]
        if len(kept) != len(targets):
            log.debug("skipped %d face(s) with implausible landmarks", len(targets) - len(kept))
        return kept

    def _device_path(
        self, swapper: InSwapper, factory: SessionFactory | None, forced: bool | None
    ) -> DeviceFacePath | None:
        if forced and factory is None:
            raise ValueError("device_graphs=True needs the session factory")
        if forced is False or factory is None or not DeviceFacePath.supports(swapper):
            return None
        if forced is None and (
            factory.device_type == "cpu" or SessionFactory.device_type_of(swapper.session) == "cpu"
        ):
            return None  # the CPU provider (or CUDA that did not load): OpenCV is much faster there
        ops = DeviceOps(factory, use_graphs=True if forced else None)
        return DeviceFacePath(swapper, self._latents, ops)

    def _host_finish(
        self, image: ImageBGR, config: MasksSettings, settings: Settings, timings: dict[str, float]
    ) -> HostFinish | None:
        """The device path's host steps, done as the OpenCV path does them, on crops only: the
        extra masks (occlusion and region models read the host frame, which still holds the
        original picture; the mouth needs only the landmarks) combined into the paste mask, colour
        match and sharpening. None when none is on."""
        comp = settings.composite
        # The restorer runs (and its output is what gets sharpened) only at a blend above 0. Known
        # difference: at 0 < blend < 1 the CPU path sharpens the blend, this path the restorer's
        # share of it (sharpening the swap too would feed a sharpened face into the restorer).
        enhancing = self._enhancer is not None and settings.enhancer.blend > 0.0
        if not (
            config.mouth or config.occlusion or config.regions or comp.colour_match or comp.sharpen > 0.0
        ):
            return None
        size = self._size

        def mask(target: SwapTarget, m: Matrix2x3, box: MaskArray) -> FaceMask:
            return self._masks.build(image, m, target.kps, box, config, timings, want_skin=comp.colour_match)

        def swapped(target: SwapTarget, m: Matrix2x3, face: FaceMask, crop: ImageBGR) -> None:
            if comp.colour_match:
                t0 = time.perf_counter()
                # The frame's own face, from the host copy (still the original picture).
                warp_paste_crop(image, m, size, out=self._crop)
                np.copyto(crop, colour_transfer(crop, self._crop, face.skin))
                _add_ms(timings, "colour", t0)
            if comp.sharpen > 0.0 and not enhancing:
                self._sharpen(crop, comp.sharpen, timings)

        def restored(crop: ImageBGR) -> None:
            self._sharpen(crop, comp.sharpen, timings)

        return HostFinish(
            mask,
            swapped if comp.colour_match or (comp.sharpen > 0.0 and not enhancing) else None,
            restored if comp.sharpen > 0.0 and enhancing else None,
        )

    def _sharpen(self, crop: ImageBGR, amount: float, timings: dict[str, float]) -> None:
        t0 = time.perf_counter()
        unsharp_mask(crop, amount, out=crop, blurred=self._blur_buffer(crop))
        _add_ms(timings, "sharpen", t0)

    def _latent(self, target: SwapTarget, identity: int | None = None) -> npt.NDArray[np.float32]:
        return self._latents[check_identity(target, len(self._latents), identity)]

    def _blur_buffer(self, crop: ImageBGR) -> ImageBGR:
        size = int(crop.shape[0])
        buf = self._blurred.get(size)
        if buf is None:
            buf = self._blurred[size] = np.zeros_like(crop)
        return buf

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
                hint="Build it with a QualityModels loader (realtime.build.wiring does).",
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


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _add_ms(timings: dict[str, float], key: str, t0: float) -> None:
    timings[key] = timings.get(key, 0.0) + _ms(t0)


def _mask_settings(settings: Settings) -> MaskSettings:
    return MaskSettings(erode_ratio=settings.composite.erode_ratio, blur_ratio=settings.composite.blur_ratio)


__all__ = ["FaceAnalyser", "FaceSwapWorker", "StageUnavailableError", "embedding_distance"]
