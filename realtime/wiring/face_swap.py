"""Assemble a run from user choices: models, source identity, stages, source and sink.

Shared by the CLI, the GUI and the benchmark so all three run the very same engine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from models.files.store import ModelStore, default_models_dir
from models.runtime.inference_hub import InferenceHub
from models.runtime.providers import auto_provider
from models.runtime.session import InferenceClock, SessionConfig, SessionFactory
from models.runtime.session_pool import SessionPool
from realtime.core.errors import SourceError
from realtime.core.settings import Settings, SettingsError
from realtime.core.stage_set import StageSet
from realtime.face.analyser import FaceAnalyser
from realtime.face.model_api import AnalysisModels
from realtime.face.picks import LivePicks
from realtime.face.source_face import SourceIdentity, load_identity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.wiring.model_loading import (
    EngineServices,
    ModelPaths,
    StoreQualityModels,
    check_models_present,
    frame_enhance_stages,
    load_analysis_models,
    load_swapper_model,
    shared_swapper,
)


@dataclass(frozen=True, slots=True)
class ModelOptions:
    models_dir: Path | None = None
    allow_unverified: bool = False
    cache_dir: Path | None = None  # TensorRT engine cache; defaults beside the models
    overrides: tuple[tuple[str, Path], ...] = ()  # models the user named by path
    clock: InferenceClock | None = None  # benchmarks: measure time inside the models
    # Faces picked in the live preview (the control panel): each run's analyser locks onto them.
    picks: LivePicks | None = field(default=None, compare=False, repr=False)
    # Sessions shared across runs of one process (the server's streams); None: each run its own.
    session_pool: SessionPool | None = field(default=None, compare=False, repr=False)
    # The process's inference services (the swapper batched across every stream); None: each run
    # has its own, shared by its workers.
    inference: InferenceHub | None = field(default=None, compare=False, repr=False)
    # One store per run, so its hash cache and "unverified model" notes are shared by every load.
    _store: ModelStore | None = field(default=None, compare=False, repr=False)

    def paths(self) -> ModelPaths:
        if self._store is None:
            folder = self.models_dir or default_models_dir()
            store = ModelStore(folder, allow_unverified=self.allow_unverified)
            object.__setattr__(self, "_store", store)
        assert self._store is not None
        return ModelPaths(self._store, self.overrides)


def resolve_provider(settings: Settings) -> Settings:
    """`settings` with `pipeline.provider = "auto"` replaced by what it runs on here."""
    if settings.pipeline.provider != "auto":
        return settings
    return settings.with_overrides({"pipeline.provider": auto_provider()})


def session_factory(settings: Settings, options: ModelOptions) -> SessionFactory:
    provider = settings.pipeline.provider
    if provider == "auto":
        provider = auto_provider()
    paths = options.paths()
    cache = options.cache_dir or paths.store.models_dir / "trt-cache"
    threads = 0
    if provider == "cpu":
        # Each frame in flight runs its own sessions at the same time: sharing the cores between
        # them avoids N workers x all-core thread pools fighting over the same cores.
        threads = max(1, (os.cpu_count() or 1) // settings.pipeline.frames_in_flight)
    return SessionFactory(
        SessionConfig(
            provider=provider,
            fp16=settings.pipeline.fp16,
            cache_dir=cache,
            intra_op_threads=threads,
        ),
        clock=options.clock,
        pool=options.session_pool,
    )


@dataclass(frozen=True, slots=True)
class IdentityMapping:
    """`--map REF=SOURCE`: the person in the reference photo becomes the source identity."""

    reference: npt.NDArray[np.float32]  # embedding of the person to find in the video
    identity: SourceIdentity  # who they become
    reference_photo: Path | None = None


@dataclass
class FaceSwapStages:
    """A StageFactory for the engine: builds the analyser and one swap worker per frame in flight.

    The analysis models loaded for the source photos are reused by the first stage set, so
    starting a run loads each model once. Each worker gets its own swapper, enhancer and mask
    sessions (the ones the settings switch on), loaded here once.

    identities (SwapTarget.identity indexes them): 0 = `identity` (the --source person; the first
    mapping's when only --map was given), k >= 1 = mappings[k - 1].identity.
    """

    options: ModelOptions
    identity: SourceIdentity
    reference: npt.NDArray[np.float32] | None = None
    _warm: tuple[Settings, AnalysisModels] | None = field(default=None, repr=False)
    # The analysis models of the last stage set, by what they were loaded for: a reload of worker
    # models only (swapper, enhancer, masks) need not load the detector and recogniser again.
    _analysis: tuple[tuple[object, ...], AnalysisModels] | None = field(default=None, repr=False)
    fallbacks: list[str] = field(default_factory=list)
    mappings: tuple[IdentityMapping, ...] = ()
    # The run's own inference hub where the options name none (a lone run: its workers share it).
    _hub: InferenceHub = field(default_factory=InferenceHub, repr=False)

    @property
    def identities(self) -> tuple[SourceIdentity, ...]:
        return (self.identity, *(m.identity for m in self.mappings))

    def __call__(self, settings: Settings) -> StageSet:
        paths = self.options.paths()
        factory = session_factory(settings, self.options)
        key = (
            settings.detector.model,
            0 if settings.detector.model == "mtcnn" else settings.detector.size,  # MTCNN has no size
            settings.pipeline.provider,
            settings.pipeline.fp16,
            settings.swap.recognizer,
        )
        analysis = self._reuse_analysis(settings)
        if analysis is None and self._analysis is not None and self._analysis[0] == key:
            analysis = self._analysis[1]
        if analysis is None:
            analysis = load_analysis_models(paths, settings, factory)
        self._analysis = (key, analysis)
        # One model session for every worker of every engine of the process, batched across them;
        # each worker its own wrapper (its buffers), all on this engine's stream of the service.
        hub = self._hub if self.options.inference is None else self.options.inference
        shared = shared_swapper(paths, settings, factory, hub)
        on_device = shared.kind == "device" and SessionFactory.device_type_of(shared.session) != "cpu"
        client = shared.service.client(f"engine-{id(self):x}") if on_device or shared.kind == "host" else None
        swappers = [
            load_swapper_model(paths, settings, factory, shared.session)
            for _ in range(settings.pipeline.frames_in_flight)
        ]
        # The enhancer and mask models too, on the host path (the device path binds its own).
        services = None if on_device else EngineServices(hub, factory, f"engine-{id(self):x}")
        workers = tuple(
            FaceSwapWorker(
                swapper,
                self.identities,
                settings,
                StoreQualityModels(paths, factory, services),
                factory,
                client=client,
                client_on_device=on_device,
            )
            for swapper in swappers
        )
        frame_stages = frame_enhance_stages(paths, settings, factory, hub, f"engine-{id(self):x}")
        self.fallbacks.extend(m for m in factory.fallbacks if m not in self.fallbacks)
        label = f"{settings.detector.model} + {settings.swap.model}"
        if settings.enhancer.model != "none":
            label += f" + {settings.enhancer.model}"
        if settings.frame_enhancer.model != "none":
            label += f" + {settings.frame_enhancer.model}"
        # The provider that really runs the swap: after a fallback the asked-for one would mislead.
        running = SessionFactory.provider_of(swappers[0].session)
        asked = resolve_provider(settings).pipeline.provider
        label += f" on {running}" if running == asked else f" on {running} ({asked} did not load)"
        analyser = FaceAnalyser(
            analysis, settings, self.reference, [m.reference for m in self.mappings], picks=self.options.picks
        )
        # What "auto" means here, resolved once per build: the engine compares settings with it.
        return StageSet(analyser, workers, label, auto_provider=auto_provider(), frame_stages=frame_stages)

    def _reuse_analysis(self, settings: Settings) -> AnalysisModels | None:
        warm, self._warm = self._warm, None
        if warm is None:
            return None
        warm_settings, models = warm
        same = (
            warm_settings.detector == settings.detector
            and warm_settings.pipeline.provider == settings.pipeline.provider
            and warm_settings.swap.recognizer == settings.swap.recognizer
        )
        return models if same else None


def prepare_face_swap(
    source_photos: Sequence[Path],
    settings: Settings,
    options: ModelOptions,
    reference_photo: Path | None = None,
    mappings: Sequence[tuple[Path, Path]] = (),
) -> FaceSwapStages:
    """Check models, embed the source identity (and the reference face), return the stage factory.

    mappings: (reference photo, source photo) pairs for swap.target "mapped": the person in each
    reference photo becomes the person in its source photo. `source_photos` may then be empty.
    Fails with a one-line FaceCastError before any camera or output is opened.
    """
    if settings.swap.target == "mapped" and not mappings:
        raise SettingsError(
            "Setting 'swap.target' is 'mapped' but no identity mapping was given.",
            hint="Pass --map REF_PHOTO=SOURCE_PHOTO (repeatable).",
        )
    if settings.swap.target == "reference" and reference_photo is None:
        raise SettingsError(
            "Setting 'swap.target' is 'reference' but no reference photo was given.",
            hint="Pass --reference PHOTO (a photo of the person whose face is swapped).",
        )
    if not source_photos and not mappings:
        raise SourceError(
            "No source photo given.", hint="Pass --source PHOTO or --map REF_PHOTO=SOURCE_PHOTO."
        )
    paths = options.paths()
    check_models_present(paths, settings)
    factory = session_factory(settings, options)
    analysis = load_analysis_models(paths, settings, factory)
    mapped = tuple(
        IdentityMapping(
            load_identity([ref], analysis.detector, analysis.identity, "reference").embedding,
            load_identity([src], analysis.detector, analysis.recognizer),
            ref,
        )
        for ref, src in mappings
    )
    if source_photos:
        identity = load_identity(list(source_photos), analysis.detector, analysis.recognizer)
    else:
        identity = mapped[0].identity
    reference = None
    if reference_photo is not None:
        reference = load_identity(
            [reference_photo], analysis.detector, analysis.identity, "reference"
        ).embedding
    stages = FaceSwapStages(options, identity, reference, mappings=mapped)
    stages._warm = (settings, analysis)
    stages.fallbacks.extend(factory.fallbacks)
    return stages
