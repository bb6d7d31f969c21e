"""A file job from start to end on this machine: the plan, each chunk not yet finished, the
finished file. The same call after a crash or a kill resumes from the chunks that are done."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from realtime.api import (
    DEFAULT_PRESET,
    ModelOptions,
    Settings,
    SinkError,
    SourceError,
    StageFactory,
    can_sign,
    check_output_free,
    check_video_container,
    load_preset,
    new_run_id,
    parse_override,
    prepare_face_swap,
    provenance_tags,
    remove_stale_partials,
    resolve_provider,
    sign_video,
)
from realtime.jobs.assemble import AssembleReport, assemble
from realtime.jobs.chunks import DEFAULT_CHUNK_S, DEFAULT_WARMUP_FRAMES, plan_chunks
from realtime.jobs.errors import InputEndsEarlyError, JobBusyError, JobInterrupted, OutputExistsError
from realtime.jobs.manifest import (
    JobLock,
    Manifest,
    done_chunks,
    finished_chunk_files,
    job_folder,
    read_manifest,
    remove_leftovers,
    reset_folder,
    write_atomically,
)
from realtime.jobs.probe import MediaInfo, file_identity, probe
from realtime.jobs.process import run_chunk
from realtime.jobs.storage import deliver, exists, is_s3, place

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (frames done, frames in all)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """Everything a job's output depends on, in a form that travels (JSON) to other machines."""

    input: str
    output: str
    source: tuple[str, ...] = ()
    maps: tuple[str, ...] = ()  # "REF_PHOTO=SOURCE_PHOTO"
    reference: str | None = None
    models_dir: str | None = None
    allow_unverified: bool = False
    preset: str | None = None
    overrides: tuple[str, ...] = ()  # "section.key=value"
    chunk_s: float = DEFAULT_CHUNK_S
    warmup_frames: int = DEFAULT_WARMUP_FRAMES
    overwrite: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> JobSpec:
        data = json.loads(text)
        for key in ("source", "maps", "overrides"):
            data[key] = tuple(data.get(key, ()))
        return JobSpec(**data)

    def settings_key(self) -> str:
        """What the frames depend on (not where they go, nor --overwrite)."""
        parts = (self.source, self.maps, self.reference, self.preset, self.overrides, self.warmup_frames)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Set by a signal handler; `signum` says which signal asked (the exit code follows it)."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: list[int] = field(default_factory=list)

    def request(self, signum: int) -> None:
        self.signum.append(signum)
        self.event.set()


@dataclass(frozen=True, slots=True)
class JobResult:
    output: str  # a path, or the s3:// object it was uploaded to
    frames: int
    expected_frames: int
    chunks: int
    resumed_chunks: int
    report: AssembleReport


def build_stages(spec: JobSpec) -> tuple[Settings, StageFactory]:
    """The settings and the face swap the spec names (the models load here, once)."""
    settings = load_preset(spec.preset or DEFAULT_PRESET)
    overrides = dict(parse_override(o) for o in spec.overrides)
    if spec.reference:
        overrides["swap.target"] = "reference"
    if spec.maps:
        overrides["swap.target"] = "mapped"
    settings = resolve_provider(settings.with_overrides(overrides))
    mappings = []
    for text in spec.maps:
        ref, _, src = text.partition("=")
        mappings.append((Path(ref), Path(src)))
    options = ModelOptions(
        models_dir=Path(spec.models_dir) if spec.models_dir else None, allow_unverified=spec.allow_unverified
    )
    stages = prepare_face_swap(
        [Path(p) for p in spec.source],
        settings,
        options,
        Path(spec.reference) if spec.reference else None,
        mappings,
    )
    return settings, stages


def check_paths(spec: JobSpec) -> None:
    """Refuse, before any work, an output that is there already or is the input itself. (An
    S3 input is checked when it is fetched, an S3 output here by asking the store.)"""
    check_video_container(Path(spec.output))  # the name alone says whether it can hold the video
    if is_s3(spec.input) or is_s3(spec.output):
        if is_s3(spec.output) and not spec.overwrite and exists(spec.output):
            raise OutputExistsError(f"{spec.output} exists already.", hint="Pass --overwrite to replace it.")
        if not is_s3(spec.input) and not Path(spec.input).is_file():
            raise SourceError(f"Video file not found: {spec.input}")
        return
    source, output = Path(spec.input).expanduser(), Path(spec.output).expanduser()
    if not source.is_file():
        raise SourceError(
            f"Video file not found: {source}" if not source.exists() else f"{source} is not a file."
        )
    if output.resolve() == source.resolve():
        raise SinkError(f"--output {output} is the --input file: writing there would destroy it.")
    if output.is_dir():
        raise SinkError(f"Output {output} is a folder.", hint=f"Give a file name, e.g. {output / 'out.mp4'}.")
    check_output_free(str(output), spec.overwrite)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        probe_file = output.with_name(f".{output.name}.facecast-check")
        probe_file.touch()
        probe_file.unlink()
    except OSError as err:
        raise SinkError(f"Cannot write output {output} ({getattr(err, 'strerror', None) or err}).") from err


def prepare_job(spec: JobSpec, info: MediaInfo) -> tuple[Manifest, set[int]]:
    """The job's plan (made now, or read back from an earlier run of the same job) and the
    chunks already finished. The caller holds the job's lock."""
    source, output = Path(spec.input), Path(spec.output)
    folder = job_folder(output)
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(output)  # what a run killed while joining the chunks left beside it
    identity = file_identity(source)
    old = read_manifest(folder)
    if old is not None and old.input_identity == identity and old.settings_key == spec.settings_key():
        remove_leftovers(folder)
        return old, done_chunks(folder, old)
    if old is not None:
        log.warning("The input or the settings changed since the job in %s began; starting afresh.", folder)
    reset_folder(folder)
    manifest = Manifest(
        input=str(source),
        input_identity=identity,
        output=str(output),
        settings_key=spec.settings_key(),
        time_base=str(info.time_base),
        chunks=tuple(plan_chunks(info, spec.chunk_s, spec.warmup_frames)),
        expected_frames=max(info.expected_frames, info.frames),
        run_id=new_run_id(),
    )
    write_atomically(folder / "manifest.json", manifest.to_json())
    return manifest, set()


def read_job(spec: JobSpec) -> Manifest:
    """The plan of a job begun already (by prepare_job), for a worker that does one chunk of it."""
    from realtime.jobs.errors import JobFailedError

    folder = job_folder(Path(spec.output))
    manifest = read_manifest(folder)
    if manifest is None or manifest.settings_key != spec.settings_key():
        raise JobFailedError(
            f"The job of {spec.output} has no plan in {folder} (it was cancelled or finished)."
        )
    return manifest


def finish_job(
    spec: JobSpec, manifest: Manifest, info: MediaInfo, tags: dict[str, str] | None = None
) -> JobResult:
    """Join the finished chunks into the output and remove the job's folder."""
    folder = job_folder(Path(spec.output))
    output = Path(spec.output)
    if output.exists() and not spec.overwrite:
        raise OutputExistsError(
            f"{output} appeared while the job ran; it is left as it is.",
            hint=f"The finished chunks stay in {folder}; pass --overwrite to replace it.",
        )
    # MP4/MOV carry a signed C2PA manifest; other containers say it in their tags only.
    signer = partial(sign_video, title=output.name, run_id=manifest.mark_id) if can_sign(output) else None
    chunks = [folder / c.name for c in manifest.chunks]
    report = assemble(Path(spec.input), chunks, output, extra_tags=tags or provenance_tags(), sign=signer)
    shutil.rmtree(folder, ignore_errors=True)
    frames = report.video_frames
    return JobResult(str(output), frames, manifest.expected_frames, len(manifest.chunks), 0, report)


def run_file_job(
    spec: JobSpec,
    settings: Settings,
    stages: StageFactory,
    stop: StopRequest | None = None,
    on_progress: Progress | None = None,
    tags: dict[str, str] | None = None,
) -> JobResult:
    """Process the whole job here; raises InputEndsEarlyError (after writing what there was)
    for a truncated input, JobInterrupted when `stop` was requested."""
    stop = stop or StopRequest()
    check_paths(spec)
    placed = place(spec)  # S3 objects: the input fetched, the output built locally
    spec = placed.spec
    check_paths(spec)
    info = probe(Path(spec.input))
    folder = job_folder(Path(spec.output))
    try:
        result = _run_locked(spec, info, settings, stages, stop, on_progress, tags)
        deliver(placed)
        if placed.upload_to is not None:
            result = replace(result, output=placed.upload_to)
        check_complete(result, info)
        return result
    except JobBusyError:
        raise  # the folder is the other process's
    except BaseException:
        if folder.is_dir() and not finished_chunk_files(folder):
            shutil.rmtree(folder, ignore_errors=True)  # nothing finished: nothing to resume
        raise


def _run_locked(
    spec: JobSpec,
    info: MediaInfo,
    settings: Settings,
    stages: StageFactory,
    stop: StopRequest,
    on_progress: Progress | None,
    tags: dict[str, str] | None,
) -> JobResult:
    folder = job_folder(Path(spec.output))
    with JobLock(folder):
        manifest, done = prepare_job(spec, info)
        total = sum(c.frames for c in manifest.chunks)
        count = [sum(c.frames for c in manifest.chunks if c.index in done)]

        def on_frame() -> None:
            count[0] += 1
            if on_progress is not None:
                on_progress(count[0], total)

        if on_progress is not None:
            on_progress(count[0], total)
        resumed = len(done)
        for chunk in manifest.chunks:
            if chunk.index in done:
                continue
            outcome = run_chunk(
                info, chunk, folder / chunk.name, settings, stages, stop.event, on_frame, manifest.mark_id
            )
            if not outcome.completed:
                signum = stop.signum[0] if stop.signum else 2
                raise JobInterrupted(
                    f"Stopped: {len(done)} of {len(manifest.chunks)} chunks are finished and kept.",
                    signum,
                    hint="Run the same command again to resume.",
                )
            done.add(chunk.index)
        return replace(finish_job(spec, manifest, info, tags), resumed_chunks=resumed)


def check_complete(result: JobResult, info: MediaInfo) -> None:
    if info.damaged_at_s is None and result.frames >= result.expected_frames - max(
        2, result.expected_frames // 50
    ):
        return
    where = f"damaged at {info.damaged_at_s:.1f} s" if info.damaged_at_s is not None else "frames missing"
    what = "the input ends early" if info.ends_early else "frames are missing in the input"
    raise InputEndsEarlyError(
        f"processed {result.frames} of ~{result.expected_frames} frames: {what} ({where}); "
        f"{result.output} holds those {result.frames} frames."
    )


def process_chunk(
    spec: JobSpec,
    index: int,
    built: tuple[Settings, StageFactory] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Do chunk `index` of the job (planned already) unless its file is there: the frames written."""
    folder = job_folder(Path(spec.output))
    manifest = read_job(spec)
    chunk = manifest.chunks[index]
    if (folder / chunk.name).is_file():
        return 0  # done already (a task delivered twice)
    settings, stages = built if built is not None else build_stages(spec)
    info = probe(Path(spec.input))
    result = run_chunk(
        info, chunk, folder / chunk.name, settings, stages, stop or threading.Event(), run_id=manifest.mark_id
    )
    return result.frames_written
