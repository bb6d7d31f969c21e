"""Many file jobs one after another, each on its own: one that fails is reported and the rest go
on; the models are loaded once for all the jobs that share their settings."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from realtime.api import ExitCode, FaceCastError, Settings, SourceError, StageFactory
from realtime.jobs.errors import JobInterrupted
from realtime.jobs.filejob import JobResult, JobSpec, StopRequest, build_stages, run_file_job

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi", ".ts"})


@dataclass(frozen=True, slots=True)
class BatchItem:
    spec: JobSpec
    result: JobResult | None
    error: str = ""
    exit_code: int = ExitCode.OK

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK


def specs_from_jobs_file(path: Path, template: JobSpec) -> list[JobSpec]:
    """A JSON list (or one object a line) of {"input": ..., "output": ..., "source": [...]}; what a
    job leaves out comes from the command line (`template`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SourceError(f"Cannot read the jobs file {path} ({err.strerror or err}).") from err
    try:
        entries = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()
        ]  # fmt: skip
    except json.JSONDecodeError as err:
        raise SourceError(f"The jobs file {path} is not JSON (line {err.lineno}: {err.msg}).") from err
    specs = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise SourceError(f'Job {n} in {path} needs an "input" and an "output".')
        base = path.parent
        source = entry.get("source", template.source)
        sources = (source,) if isinstance(source, str) else tuple(source)
        specs.append(
            replace(
                template,
                input=str(base / entry["input"]),
                output=str(base / entry["output"]),
                source=tuple(str(base / s) for s in sources),
            )
        )
    return specs


def specs_for_folder(targets: Path, output_dir: Path, template: JobSpec) -> list[JobSpec]:
    """Every video in `targets`, one job each, into `output_dir` under the same name."""
    if not targets.is_dir():
        raise SourceError(f"{targets} is not a folder.")
    videos = sorted(p for p in targets.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
    if not videos:
        raise SourceError(
            f"No video files in {targets}.", hint=f"Looked for {', '.join(sorted(VIDEO_SUFFIXES))}."
        )
    return [replace(template, input=str(v), output=str(output_dir / v.name)) for v in videos]


def run_batch(
    specs: Sequence[JobSpec],
    stop: StopRequest | None = None,
    on_done: Callable[[BatchItem], None] = lambda item: None,
    build: Callable[[JobSpec], tuple[Settings, StageFactory]] = build_stages,
    tags: dict[str, str] | None = None,
) -> list[BatchItem]:
    """Run every job; a signal stops the batch (JobInterrupted) after saying what was done."""
    stop = stop or StopRequest()
    built: dict[str, tuple[Settings, StageFactory]] = {}
    items: list[BatchItem] = []
    for spec in specs:
        if stop.event.is_set():
            break
        try:
            key = spec.settings_key() + repr((spec.models_dir, spec.allow_unverified))
            if key not in built:
                built[key] = build(spec)
            settings, stages = built[key]
            item = BatchItem(spec, run_file_job(spec, settings, stages, stop, tags=tags))
        except JobInterrupted:
            raise
        except FaceCastError as err:
            item = BatchItem(spec, None, err.user_message(), err.exit_code)
        except Exception as err:  # one job's unforeseen failure must not cost the others theirs
            log.debug("job %s failed", spec.input, exc_info=True)
            item = BatchItem(spec, None, f"failed unexpectedly ({type(err).__name__}: {err})", 1)
        items.append(item)
        on_done(item)
    return items
