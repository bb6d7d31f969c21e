"""Load the face models a worker needs, once, from the store, through one session factory."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.cli_text import app_command
from models.errors import ModelError, ModelMissingError
from models.files.catalogue import get_entry
from models.files.frame_enhancer_catalogue import frame_enhancer_facts
from models.files.store import ModelStore, download_command
from models.runtime.inference_hub import InferenceHub, InputKind, ModelService
from models.runtime.inference_service import ServiceClient
from models.runtime.session import SessionFactory, wrap_checked
from models.wrappers.dlib_recognizer import DlibRecognizer
from models.wrappers.enhancers import FaceRestorer, RestorerName, load_restorer
from models.wrappers.frame_enhancers import FrameEnhancer
from models.wrappers.maskers import FaceParser, Occluder
from models.wrappers.mtcnn import MTCNN
from models.wrappers.router import load_detector, load_recognizer
from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.registry import check_swapper_file, converter_entry, family_of, load_swapper
from realtime.core.settings import DetectorSettings, Settings
from realtime.face.model_api import AnalysisModels, FaceDetector, Recognizer
from realtime.picture.frame_enhancer import FrameEnhanceStage

# Settings values -> model files, where the setting is not a catalogue entry's own name (the
# swappers' names are: their files come from the catalogue).
CATALOGUE_FILE = {
    "det_10g": "det_10g.onnx",
    "scrfd_2.5g": "scrfd_2.5g.onnx",
    "w600k_r50": "w600k_r50.onnx",
    # enhancer.model values
    "gpen_256": "GPEN-BFR-256.onnx",
    "gpen_512": "GPEN-BFR-512.onnx",
    "gfpgan_1.4": "gfpgan_1.4.onnx",
    "codeformer": "codeformer.onnx",
    # mask models
    "xseg_1": "xseg_1.onnx",
    "bisenet_resnet_34": "bisenet_resnet_34.onnx",
}
OCCLUDER_MODEL = "xseg_1"
PARSER_MODEL = "bisenet_resnet_34"


@dataclass(frozen=True, slots=True)
class ModelPaths:
    """Where each model comes from: the store (verified) or a file the user named."""

    store: ModelStore
    overrides: tuple[tuple[str, Path], ...] = ()  # (catalogue name, user file)

    def path(self, name: str) -> Path:
        """The verified file of the model called `name` (a settings value or a catalogue entry)."""
        for key, value in self.overrides:
            if key == name:
                return self.store.resolve_user_file(value)[0]
        return self.store.resolve(file_of(name))


def file_of(name: str) -> str:
    """The model file behind a settings value (CATALOGUE_FILE) or a catalogue entry's name."""
    known = CATALOGUE_FILE.get(name)
    return known if known is not None else get_entry(name).files[0].name


def swapper_model_names(settings: Settings) -> list[str]:
    """The swapper and, for the families that take one, its embedding converter (catalogue names)."""
    name = settings.swap.model
    converter = converter_entry(name)
    return [name] if converter is None else [name, converter]


def load_detector_for(paths: ModelPaths, settings: DetectorSettings, factory: SessionFactory) -> FaceDetector:
    if settings.model == "mtcnn":
        return MTCNN(factory=factory)
    return load_detector(
        paths.path(settings.model),
        factory,
        input_size=(settings.size, settings.size),
        score_threshold=settings.threshold,
    )


def load_analysis_models(paths: ModelPaths, settings: Settings, factory: SessionFactory) -> AnalysisModels:
    """Detector + recogniser; a missing/corrupt/wrong model raises ModelError."""
    detector = load_detector_for(paths, settings.detector, factory)
    recognizer = load_recognizer(paths.path("w600k_r50"), factory)
    return AnalysisModels(detector, recognizer, settings.detector.model, load_identifier(settings))


def load_identifier(settings: Settings) -> Recognizer | None:
    """The recogniser that tells people apart, when it is not ArcFace (None)."""
    if settings.swap.recognizer == "dlib":
        return DlibRecognizer()  # its model files ship in a package: nothing to download
    return None


def load_swapper_model(
    paths: ModelPaths, settings: Settings, factory: SessionFactory, session: Any = None
) -> FaceSwapper:
    """The swapper `swap.model` names (with its embedding converter where its family needs one).
    session: the shared service's session of its file (each worker's wrapper is its own)."""
    name = settings.swap.model
    converter = converter_entry(name)
    return load_swapper(
        paths.path(name),
        factory,
        family_of(name).facts.family,
        None if converter is None else paths.path(converter),
        session=session,
    )


def shared_swapper(
    paths: ModelPaths, settings: Settings, factory: SessionFactory, hub: InferenceHub
) -> ModelService:
    """The process's service for the swapper `swap.model` names on this factory's device (device
    tensors where the pipeline runs on a GPU, host arrays on the CPU), one instance per frame in
    flight."""
    name = settings.swap.model
    path = paths.path(name)
    family = family_of(name).facts.family
    kind: InputKind = "host" if factory.device_type == "cpu" else "device"
    instances = settings.pipeline.frames_in_flight

    def check(session: Any) -> None:
        check_swapper_file(path, session, family)

    return hub.service(path, factory, kind=kind, instances=instances, label=name, check=check)


def frame_enhance_stages(
    paths: ModelPaths, settings: Settings, factory: SessionFactory, hub: InferenceHub, stream: str
) -> tuple[FrameEnhanceStage, ...]:
    """One frame enhancer stage per worker for `frame_enhancer.model` (none when it is "none"),
    all on this engine's stream (`stream`) of the process's shared service of its file: a frame's
    tiles, and other streams', share model calls. Host arrays on every provider (the picture is on
    the host after the faces); a file that is not a frame enhancer is refused before it is batched."""
    name = settings.frame_enhancer.model
    if name == "none":
        return ()
    path = paths.path(name)
    facts = frame_enhancer_facts(name)

    def check(session: Any) -> None:
        wrap_checked(
            path,
            session,
            lambda s: FrameEnhancer.check_contract(s.get_inputs(), s.get_outputs(), facts, name),
        )

    service = hub.service(path, factory, label=name, check=check)
    client = service.service.client(stream)
    stages = []
    for _ in range(settings.pipeline.frames_in_flight):
        enhancer = FrameEnhancer.from_file(name, path, factory, service.session)
        enhancer.served.attach(client)
        stages.append(FrameEnhanceStage(enhancer))
    return tuple(stages)


@dataclass
class EngineServices:
    """One engine's streams on the process's shared model services (the hub): one client per
    model, shared by the engine's workers, so the hub's batch window sees one stream per engine."""

    hub: InferenceHub
    factory: SessionFactory
    name: str
    _clients: dict[Path, tuple[ModelService, ServiceClient]] = field(default_factory=dict, repr=False)
    # A quality model switched on live is loaded on a worker's thread, two workers at once.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def shared(
        self, path: Path, label: str, check: Callable[[Any], None] | None = None
    ) -> tuple[Any, ServiceClient]:
        """The shared session of the model in `path` and this engine's client on its service."""
        with self._lock:
            found = self._clients.get(path)
            if found is None:
                service = self.hub.service(path, self.factory, label=label, check=check)
                found = self._clients[path] = (service, service.service.client(self.name))
        return found[0].session, found[1]


@dataclass
class StoreQualityModels:
    """QualityModels from the store through a session factory. One per worker: each worker owns
    its wrappers and their reused input buffers, like its swapper. With `services` the wrappers
    share one session per model and call it through the process's services (host path)."""

    paths: ModelPaths
    factory: SessionFactory
    services: EngineServices | None = None
    _restorers: dict[str, FaceRestorer] = field(default_factory=dict, repr=False)
    _occluder: Occluder | None = field(default=None, repr=False)
    _parser: FaceParser | None = field(default=None, repr=False)

    def restorer(self, name: RestorerName) -> FaceRestorer:
        loaded = self._restorers.get(name)
        if loaded is None:
            path = self.paths.path(name)
            session, client = self._shared(path, name)
            loaded = self._restorers[name] = load_restorer(name, path, self.factory, session)
            if client is not None:
                loaded.served.attach(client)
        return loaded

    def occluder(self) -> Occluder:
        if self._occluder is None:
            path = self.paths.path(OCCLUDER_MODEL)
            session, client = self._shared(path, OCCLUDER_MODEL)
            self._occluder = Occluder.from_file(path, self.factory, session)
            if client is not None:
                self._occluder.served.attach(client)
        return self._occluder

    def parser(self) -> FaceParser:
        if self._parser is None:
            path = self.paths.path(PARSER_MODEL)
            session, client = self._shared(path, PARSER_MODEL)
            self._parser = FaceParser.from_file(path, self.factory, session)
            if client is not None:
                self._parser.served.attach(client)
        return self._parser

    def _shared(self, path: Path, label: str) -> tuple[Any, ServiceClient | None]:
        if self.services is None:
            return None, None
        return self.services.shared(path, label)


def quality_model_names(settings: Settings) -> list[str]:
    """The enhancer, mask and frame enhancer models (CATALOGUE_FILE keys or catalogue names) that
    `settings` switch on."""
    names: list[str] = []
    if settings.enhancer.model != "none":
        names.append(settings.enhancer.model)
    if settings.frame_enhancer.model != "none":
        names.append(settings.frame_enhancer.model)
    if settings.masks.occlusion:
        names.append(OCCLUDER_MODEL)
    if settings.masks.regions:
        names.append(PARSER_MODEL)
    return names


def check_models_present(paths: ModelPaths, settings: Settings) -> None:
    """Fail fast (before opening cameras): the store's one-line message for a problem file, or one
    message naming every missing model (a fresh install would otherwise learn of them one run at a
    time)."""
    names = [*swapper_model_names(settings), "w600k_r50", *quality_model_names(settings)]
    if settings.detector.model != "mtcnn":
        names.insert(0, settings.detector.model)
    missing: list[tuple[str, ModelMissingError]] = []
    damaged: list[ModelError] = []  # truncated, wrong hash, unreadable: said beside the missing ones
    for name in names:
        try:
            paths.path(name)
        except ModelMissingError as err:
            missing.append((name, err))
        except ModelError as err:
            damaged.append(err)
    if not missing and damaged:
        raise damaged[0]
    if len(missing) == 1 and not damaged:
        raise missing[0][1]
    if missing:
        store = paths.store
        # The catalogue entries that hold the missing files: exactly what `models download` takes
        # (the settings' names, gpen_256 and the like, are not).
        entries: list[str] = []
        files: list[str] = []
        size: int | None = 0
        for name, _ in missing:
            entry = store.entry_for(file_of(name))
            files.append(file_of(name))
            if entry.name not in entries:
                entries.append(entry.name)
                # Files that come in an archive (buffalo_l.zip) download as the archive: their own
                # sizes do not add up to what is fetched, so no figure is better than a wrong one.
                size = (
                    None
                    if size is None or entry.archive or entry.total_size is None
                    else size + entry.total_size
                )
        about = f" (about {size / 1e6:,.0f} MB, verified)" if size else " (verified)"
        # Damaged files are named beside the missing ones, so one run lists everything to fetch.
        also = "".join(f" Also: {err.user_message()}" for err in damaged)
        raise ModelMissingError(
            f"Models not downloaded yet: {', '.join(files)} (folder {store.models_dir}).{also}",
            hint=f"Run `{download_command(' '.join(entries), store.models_dir)}`{about}, then again; "
            f"`{app_command('models list')}` shows what each is.",
        )


__all__ = [
    "CATALOGUE_FILE",
    "EngineServices",
    "ModelPaths",
    "StoreQualityModels",
    "check_models_present",
    "file_of",
    "frame_enhance_stages",
    "load_analysis_models",
    "load_detector_for",
    "load_identifier",
    "load_swapper_model",
    "quality_model_names",
    "shared_swapper",
    "swapper_model_names",
]
