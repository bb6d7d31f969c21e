"""`main.py run`: one source, the face swap, one output, until the input ends or a signal stops it.

The preview window is the GUI layer's (main.py hands it in as a WindowOutput): this layer does not
import the GUI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from realtime.core.errors import SinkError
from realtime.core.watermark.payload import new_run_id

if TYPE_CHECKING:  # the CLI imports the engine lazily, so that `--help` stays instant
    from realtime.core.contracts import FrameSink, FrameSource
    from realtime.core.engine import Engine
    from realtime.core.settings import Settings
    from realtime.lifecycle.signals import StopSignals


class WindowOutput(Protocol):
    """The preview window behind `--output window`, provided by the GUI layer."""

    def make_sink(self) -> FrameSink:
        """The window's sink, built before the engine opens it."""
        ...

    def prepare(self, sink: FrameSink) -> None:
        """Create the window on the GUI thread, before the engine opens the sink."""
        ...

    def run_loop(
        self,
        engine: Engine,
        sink: FrameSink,
        show_stats: bool,
        show: Callable[[str], None],
        signals: StopSignals,
    ) -> None:
        """Run the GUI's event loop until the window closes, the engine ends or a signal asks to stop."""
        ...


def sink_for_args(
    args: argparse.Namespace,
    source: FrameSource,
    window: WindowOutput | None = None,
    run_id: str | None = None,
) -> FrameSink:
    """The sink `--output` names. A virtual camera paces itself only for sources that do not: a
    camera (or a video played in real time) already delivers frames at its rate, and a second clock
    in the sink would hold each frame up to one frame period (docs/PERFORMANCE.md, figures behind the
    code)."""
    from realtime.io.outputs import open_output

    width, height = args.width, args.height
    if (width is None) != (height is None):
        # One side given: the other follows the source's shape (640 alone gave a 640x720 camera).
        src_w, src_h = source.size
        if width is None:
            width = max(16, round(height * src_w / max(src_h, 1) / 2) * 2)
        else:
            height = max(16, round(width * src_h / max(src_w, 1) / 2) * 2)
    return open_output(
        args.output,
        width=width,
        height=height,
        fps=args.fps,
        vcam_backend=getattr(args, "vcam_backend", None),
        vcam_device=getattr(args, "vcam_device", None),
        pace=not source.is_live,
        window=None if window is None else window.make_sink,
        run_id=run_id,
    )


def check_not_an_input(args: argparse.Namespace) -> None:
    """Refuse an --output file that is one of the run's own inputs: it would be overwritten."""
    name = args.output.strip()
    if name.lower() in ("vcam", "window", "null") or name.isdigit():
        return
    output = Path(name).expanduser().resolve()
    inputs = [("--input", args.input), ("--reference", args.reference)]
    inputs += [("--source", p) for p in args.source or []]
    inputs += [("--map", part) for m in args.maps for part in str(m).split("=", 1)]
    for flag, given in inputs:
        if given is not None and Path(str(given)).expanduser().resolve() == output:
            raise SinkError(
                f"--output {name} is the {flag} file: writing there would destroy it.",
                hint="Choose another output file name.",
            )


def check_display(*, for_gui: bool = False) -> None:
    """A window needs a display that answers: without one Qt aborts the process (after the models
    loaded), blaming a library that is not missing."""
    from models.cli_text import app_command
    from realtime.io.display import debian_package, display_problem, qt_x11_libraries_missing

    problem = display_problem()
    if problem is None:
        missing = qt_x11_libraries_missing()
        if missing:  # Qt would abort with "Reinstalling the application may fix this problem"
            raise SinkError(
                f"The window cannot open: Qt's X11 support needs {', '.join(missing)}, not installed here.",
                hint=f"Debian/Ubuntu: sudo apt install {' '.join(debian_package(m) for m in missing)}.",
            )
        return
    other = (
        f"`{app_command('run --source PHOTO --input CAMERA|VIDEO --output vcam|FILE')}` works without one"
        if for_gui
        else "use --output vcam or a video file instead of a window"
    )
    raise SinkError(
        f"No display to open a window on: {problem}.",
        hint=f"Run it in a desktop session (over SSH: ssh -X), or {other}.",
    )


def _settings_for_run(args: argparse.Namespace) -> Settings:
    from realtime.core.settings import DEFAULT_PRESET, load_preset
    from realtime.tools.cli_overrides import checked_overrides

    settings = load_preset(args.preset or DEFAULT_PRESET)
    overrides = checked_overrides(args)
    if args.reference:
        overrides["swap.target"] = "reference"
    if args.maps:
        overrides["swap.target"] = "mapped"
    label = _wants_label(args)
    if label is not None:
        overrides["composite.disclosure_label"] = label
    return settings.with_overrides(overrides)


LIVE_OUTPUTS = ("vcam", "window")


def _wants_label(args: argparse.Namespace) -> bool | None:
    """The disclosure mark: `--label` / `--no-label`, else on for a live output (what the panel
    does); None leaves the preset's (or a `--set composite.disclosure_label=...`) choice."""
    if args.label is not None:
        return bool(args.label)
    if any(o.split("=", 1)[0].strip() == "composite.disclosure_label" for o in args.overrides):
        return None
    return True if args.output.strip().lower() in LIVE_OUTPUTS else None


def _nothing_swapped_note(
    frames: int,
    swapped: int,
    passed_through: int,
    seen: int,
    target: str = "largest",
    detector: str = "det_10g",
) -> str | None:
    """Why a run that finished swapped nothing (its output is the input, unchanged)."""
    if frames == 0 or swapped > 0:
        return None
    if seen == 0:
        other = "mtcnn" if detector != "mtcnn" else "det_10g"
        return (
            f"note: nothing was swapped: no face was found in any of the {frames} frames "
            f"(small, turned-away or half-hidden faces are missed); try --detector {other} or a closer shot"
        )
    if passed_through > 0:
        return (
            "note: nothing was swapped: the faces found were left as they were (detector score below "
            "detector.threshold, or tracking not trusted); try --set detector.threshold=0.4"
        )
    if target in ("reference", "mapped"):
        return (
            "note: nothing was swapped: faces were found but none matched the reference photo "
            "(swap.reference_threshold); try a clearer, front-on reference photo or "
            "--set swap.reference_threshold=0.7"
        )
    return "note: nothing was swapped although faces were found"


def _parse_maps(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """`--map REF=SOURCE` pairs; exactly one of --source and --map picks who is swapped in."""
    from realtime.core.errors import SourceError

    if args.source and args.maps:
        raise SourceError(
            "--source and --map cannot be combined.",
            hint="With --map each mapping names its own source photo: --map REF_PHOTO=SOURCE_PHOTO.",
        )
    if args.maps and args.reference:
        raise SourceError(
            "--reference and --map cannot be combined.", hint="--map already names who to find."
        )
    if not args.source and not args.maps:
        raise SourceError(
            "No source photo given.", hint="Pass --source PHOTO or --map REF_PHOTO=SOURCE_PHOTO."
        )
    pairs: list[tuple[Path, Path]] = []
    for text in args.maps:
        ref, sep, src = text.partition("=")
        if not sep or not ref.strip() or not src.strip():
            raise SourceError(f"--map {text!r} must look like REF_PHOTO=SOURCE_PHOTO.")
        pairs.append((Path(ref.strip()), Path(src.strip())))
    return pairs


def probe_input(source: FrameSource) -> None:
    """Open and close a file or image input once (cheap: one decoded frame), so a missing, empty
    or audio-only file fails now. Cameras and streams are left alone: opening a camera twice
    flashes its light and costs a second, and a stream may take one connection only."""
    from realtime.io.camera_source import CameraSource
    from realtime.io.sources import FallbackSource

    inner = source.primary if isinstance(source, FallbackSource) else source
    if isinstance(inner, CameraSource):
        inner.check_present()  # Linux: is there a /dev/videoN at all (nothing is opened)
        return
    if not isinstance(getattr(inner, "path", None), Path):  # files and images have a path
        return
    source.open()
    source.close()


def cmd_run(args: argparse.Namespace, out: TextIO, window: WindowOutput | None = None) -> int:
    """`main.py run`; `window` provides `--output window` (without it that output is an error)."""
    from realtime.consent import ensure_consent
    from realtime.io.outputs import check_output_free
    from realtime.lifecycle.signals import SafeOutput, StopSignals
    from realtime.tools.cli_overrides import checked_overrides

    show, complain = SafeOutput(out), SafeOutput(sys.stderr)
    # The confirmation the panel asks for on first use, stored in the same place (realtime.consent).
    ensure_consent(bool(getattr(args, "consent", False)), sys.stdin, show)
    # Every path below (remote, file job, live run) writes the output only if it may.
    check_not_an_input(args)
    check_output_free(args.output, overwrite=bool(getattr(args, "overwrite", False)))
    checked_overrides(args)  # a bogus --set, or one a flag contradicts, whichever path runs it
    if args.label is False and args.output.strip().lower() in LIVE_OUTPUTS:
        show('note: --no-label: the output carries no "AI-modified" mark; tell the people who see it')
    from realtime.tools.cli_jobs import cmd_file_job, is_file_job, is_remote_file_job

    if getattr(args, "remote", None):
        from realtime.remote.cli import run_remote

        # Consent is established: the server is told so (it refuses without).
        # A call a signal ended exits as the local run does (130 for Ctrl+C, 143 for SIGTERM).
        remote_args = argparse.Namespace(**{**vars(args), "consent": True})
        if is_remote_file_job(args):  # every frame back, the sound kept
            from realtime.jobs.remote_file import run_remote_file

            return run_remote_file(remote_args, out)
        return run_remote(remote_args, out)

    if is_file_job(args):  # a video file into a video file: a resumable job that keeps every stream
        return cmd_file_job(args, out)
    # Signals only ask the run to stop, from the first line on: a KeyboardInterrupt raised inside a
    # native callback (llvmlite's, while the engine's modules import or compile) is swallowed there,
    # so start-up checks the request between its steps instead (checkpoint() raises Stopped, a
    # KeyboardInterrupt: exit 128 + the signal's number, nothing opened).
    with StopSignals(show) as signals:
        return _run(args, out, window, signals, show, complain)


def _run(
    args: argparse.Namespace,
    out: TextIO,
    window: WindowOutput | None,
    signals: StopSignals,
    show: Callable[[str], None],
    complain: Callable[[str], None],
) -> int:
    from realtime.core.events import EngineEvent
    from realtime.core.heap import freeze_heap
    from realtime.io.inputs import open_input
    from realtime.io.sources import FallbackSource, camera_index
    from realtime.lifecycle.run import Ending, Run
    from realtime.wiring.face_swap import ModelOptions, prepare_face_swap, resolve_provider

    signals.checkpoint()
    if args.output.strip().lower() == "window":
        check_display()
    mappings = _parse_maps(args)
    settings = resolve_provider(_settings_for_run(args))
    live_output = args.output.strip().lower() in ("vcam", "window")
    realtime = args.realtime if args.realtime is not None else live_output
    # The input is checked before the models load (seconds, or minutes for a first TensorRT build):
    # a typo in --input must not wait for them.
    source, decoding = open_input(
        args.input, realtime=realtime, loop=args.loop, width=args.width, height=args.height, fps=args.fps,
        decoder=args.decoder, provider=settings.pipeline.provider,
    )  # fmt: skip
    probe_input(source)
    signals.checkpoint()
    if decoding:
        print(f"note: {decoding}", file=out)
    if isinstance(source, FallbackSource) and source.fell_back:
        print(f"warning: {source.fell_back}; decoding on the CPU instead", file=out)
    options = ModelOptions(models_dir=args.models_dir, allow_unverified=args.allow_unverified)
    stages = prepare_face_swap(args.source or [], settings, options, args.reference, mappings)
    signals.checkpoint()
    for note in stages.identity.notes:
        print(f"note: {note}", file=out)
    for note in stages.fallbacks:
        print(f"warning: {note}", file=out)
    run_id = new_run_id()  # the frames' watermark and the recording's manifest name the same run
    sink = sink_for_args(args, source, window, run_id)
    signals.checkpoint()

    said: set[str] = set()

    def on_event(event: EngineEvent) -> None:
        if event.kind in ("error", "warning"):
            said.add(event.message)
            complain(f"{event.kind}: {event.message}")
        elif event.kind == "info":
            complain(f"note: {event.message}")

    run = Run(source, sink, settings, stages, on_event=on_event, run_id=run_id)
    in_window = window is not None and args.output.strip().lower() == "window"
    if window is not None and in_window:
        window.prepare(sink)  # on the GUI thread, before the engine opens the sink
    signals.checkpoint()  # the last moment a stop request means "nothing was run"
    # From here a stop request finishes the output: the loops below poll for it (lifecycle/signals.py).
    try:
        run.start()
        freeze_heap(collect=False)  # the models and the run's objects out of the collector's scans
        show(f"running: {run.description} ({run.engine.stages_label}); Ctrl+C stops")
        if window is not None and in_window:
            window.run_loop(run.engine, sink, args.stats, show, signals)
        else:
            stats_line = (lambda: show(run.stats().format_line())) if args.stats else None
            run.watch(signals.wait, duration_s=getattr(args, "duration", None), on_tick=stats_line)
    finally:
        if signals.requested:
            show("stopping ...")
        outcome = run.stop(say=show, stop_code=signals.exit_code)  # finishes the output
    stats = outcome.stats
    show(f"done: {stats.frames_out} frames out, {stats.frames_dropped} dropped; {stats.format_line()}")
    unswapped = _nothing_swapped_note(
        stats.frames_out,
        stats.faces_swapped,
        stats.faces_passthrough,
        stats.faces_seen,
        settings.swap.target,
        settings.detector.model,
    )
    if unswapped:
        show(unswapped)
    from realtime.io.file_sinks import ImageFileSink

    if isinstance(sink, ImageFileSink) and stats.frames_out > 1:
        # A video into a picture: only one frame can be kept, so the user is told which.
        show(f"note: {sink.path} holds the last of the {stats.frames_out} frames (an image keeps one)")
    to_file = not live_output and args.output.strip().lower() != "null"
    cut = outcome.ending in (Ending.STOPPED, Ending.DURATION)
    if cut and to_file and not args.loop and camera_index(str(args.input)) is None:
        show(f"note: stopped before the input ended: {args.output} holds its first {stats.frames_out} frames")
    if outcome.error is not None:
        if outcome.error.user_message() in said:
            return outcome.exit_code  # already said while running: once is enough
        raise outcome.error
    # Stopped by a signal: the output is finished, and the exit status still says a signal ended it.
    return outcome.exit_code
