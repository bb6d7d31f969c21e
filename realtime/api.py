"""The engine's public API: everything a client (the control panel, a server) builds a run from.

Clients import from here only, so the layers below can move without touching them; the import
rules in pyproject.toml hold the GUI to this module.
"""

from __future__ import annotations

from models.errors import (
    DownloadError,
    ExitCode,
    FaceCastError,
    LicenceNotAcceptedError,
    ModelError,
    ModelMissingError,
)
from models.fakes.doubles import write_all as write_model_doubles
from models.files.catalogue import CATALOGUE, ModelEntry, ModelFile, default_entries, get_entry
from models.files.download import Downloader, HttpGet, HttpResponse, part_path, requests_get
from models.files.frame_enhancer_catalogue import frame_enhancer_names
from models.files.store import MODELS_DIR_ENV, ModelStore, VerifyResult, default_models_dir
from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import InferenceHub
from models.runtime.providers import auto_provider
from models.runtime.session import SessionConfig, SessionFactory
from models.runtime.session_pool import SessionPool
from models.types import Detection, FloatArray, ImageBGR
from models.wrappers.mtcnn import MTCNN
from models.wrappers.swappers.registry import SwapperInfo, swapper_info, swapper_names
from realtime.consent import (
    CONSENT_TEXT,
    consent_path,
    consent_recorded,
    licence_lines,
    record_consent,
    settings_path,
)
from realtime.core import job_names
from realtime.core.contracts import FrameSink, FrameSource
from realtime.core.engine import Engine
from realtime.core.errors import OutputExistsError, SinkError, SourceError, VirtualCameraUnavailableError
from realtime.core.events import EngineEvent
from realtime.core.failures import Failure, told
from realtime.core.flow import CatchUpSlot
from realtime.core.frames import VideoFrame
from realtime.core.heap import freeze_heap
from realtime.core.image_header import picture_size
from realtime.core.metrics import Metrics, StatsSnapshot, Summary
from realtime.core.overlay import draw_disclosure_label
from realtime.core.settings import (
    DEFAULT_PRESET,
    PRESETS_DIR,
    Settings,
    SettingsError,
    available_presets,
    load_preset,
    parse_override,
)
from realtime.core.source_base import SourceWrapper
from realtime.core.stage_set import StageFactory, passthrough_stages
from realtime.core.watermark.detect import Z_MARKED
from realtime.core.watermark.payload import new_run_id
from realtime.face.model_api import AnalysisModels, FaceDetector
from realtime.face.picks import FacePick, LivePicks, MappedPerson, PickedIdentity
from realtime.face.source_face import SourceIdentity, load_identity, pick_face, read_image
from realtime.io.camera_source import CameraSource
from realtime.io.cameras import CameraInfo, CameraMode, list_cameras, probe_modes
from realtime.io.fan_out import BackgroundSink, FanOutSink, OptionalSink
from realtime.io.file_sinks import VideoFileSink, check_video_container
from realtime.io.inputs import open_input
from realtime.io.media_check import Credentials, MediaCheck, UnreadableMediaError, check_media
from realtime.io.output_info import OutputInfo, collect_output_info
from realtime.io.outputs import OutputRequest, check_output_free, open_output, open_outputs, output_file
from realtime.io.partial_files import ASSEMBLING, PartialLock, new_partial_path, remove_stale_partials
from realtime.io.provenance import can_sign, provenance_tags, read_provenance, sign_video
from realtime.io.sinks import NullSink
from realtime.io.sources import IMAGE_EXTENSIONS, refuse_stream_url
from realtime.io.test_pattern import TestPatternSource, astronaut_photo
from realtime.io.vcam_sink import VirtualCameraSink, virtual_camera_fix
from realtime.io.video_file import VideoFileSource
from realtime.lifecycle.run import Ending, EngineMaker, Run, Runner, RunOutcome
from realtime.lifecycle.signals import SafeOutput, StopSignals, signal_exit_code
from realtime.wiring.content_check import CONTENT_MODEL, ContentCheck, ContentVerdict
from realtime.wiring.face_swap import ModelOptions, prepare_face_swap, resolve_provider
from realtime.wiring.gallery_stages import ActiveFace, GalleryFaceSwap
from realtime.wiring.model_loading import check_models_present, load_analysis_models, quality_model_names

__all__ = [
    "ASSEMBLING",
    "CATALOGUE",
    "CONSENT_TEXT",
    "CONTENT_MODEL",
    "DEFAULT_PRESET",
    "IMAGE_EXTENSIONS",
    "MODELS_DIR_ENV",
    "MTCNN",
    "PRESETS_DIR",
    "Z_MARKED",
    "ActiveFace",
    "AnalysisModels",
    "BackgroundSink",
    "BatchPolicy",
    "CameraInfo",
    "CameraMode",
    "CameraSource",
    "CatchUpSlot",
    "ContentCheck",
    "ContentVerdict",
    "Credentials",
    "Detection",
    "DownloadError",
    "Downloader",
    "Ending",
    "Engine",
    "EngineEvent",
    "EngineMaker",
    "ExitCode",
    "FaceCastError",
    "FaceDetector",
    "FacePick",
    "Failure",
    "FanOutSink",
    "FloatArray",
    "FrameSink",
    "FrameSource",
    "GalleryFaceSwap",
    "HttpGet",
    "HttpResponse",
    "ImageBGR",
    "InferenceHub",
    "LicenceNotAcceptedError",
    "LivePicks",
    "MappedPerson",
    "MediaCheck",
    "Metrics",
    "ModelEntry",
    "ModelError",
    "ModelFile",
    "ModelMissingError",
    "ModelOptions",
    "ModelStore",
    "NullSink",
    "OptionalSink",
    "OutputExistsError",
    "OutputInfo",
    "OutputRequest",
    "PartialLock",
    "PickedIdentity",
    "Run",
    "RunOutcome",
    "Runner",
    "SafeOutput",
    "SessionConfig",
    "SessionFactory",
    "SessionPool",
    "Settings",
    "SettingsError",
    "SinkError",
    "SourceError",
    "SourceIdentity",
    "SourceWrapper",
    "StageFactory",
    "StatsSnapshot",
    "StopSignals",
    "Summary",
    "SwapperInfo",
    "TestPatternSource",
    "UnreadableMediaError",
    "VerifyResult",
    "VideoFileSink",
    "VideoFileSource",
    "VideoFrame",
    "VirtualCameraSink",
    "VirtualCameraUnavailableError",
    "astronaut_photo",
    "auto_provider",
    "available_presets",
    "can_sign",
    "check_media",
    "check_models_present",
    "check_output_free",
    "check_video_container",
    "collect_output_info",
    "consent_path",
    "consent_recorded",
    "default_entries",
    "default_models_dir",
    "draw_disclosure_label",
    "frame_enhancer_names",
    "freeze_heap",
    "get_entry",
    "job_names",
    "licence_lines",
    "list_cameras",
    "load_analysis_models",
    "load_identity",
    "load_preset",
    "new_partial_path",
    "new_run_id",
    "open_input",
    "open_output",
    "open_outputs",
    "output_file",
    "parse_override",
    "part_path",
    "passthrough_stages",
    "pick_face",
    "picture_size",
    "prepare_face_swap",
    "probe_modes",
    "provenance_tags",
    "quality_model_names",
    "read_image",
    "read_provenance",
    "record_consent",
    "refuse_stream_url",
    "remove_stale_partials",
    "requests_get",
    "resolve_provider",
    "settings_path",
    "sign_video",
    "signal_exit_code",
    "swapper_info",
    "swapper_names",
    "told",
    "virtual_camera_fix",
    "write_model_doubles",
]
