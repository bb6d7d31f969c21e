"""FaceCast: real-time face swap to a virtual camera.

python main.py                      open the control panel (GUI)
python main.py run --source ME.jpg --input 0 --output vcam
python main.py models list | download NAME | verify | path
python main.py doctor               what works on this machine, and how to fix what doesn't
python main.py bench                FaceCast's engine against the naive loop
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import platformdirs

from models.errors import FaceCastError
from realtime.core.errors import SinkError

log = logging.getLogger("facecast")

if TYPE_CHECKING:  # the CLI imports the engine lazily, so that `--help` stays instant
    from gui.window_sink import WindowSink
    from realtime.core.contracts import FrameSink, FrameSource
    from realtime.core.engine import Engine
    from realtime.tools.run_control import StopSignals

# Our BLAS work is a handful of tiny matrices per face; OpenBLAS's thread pools (numpy's and
# scipy's) only spin on sched_yield between calls and take cores from the pipeline's threads.
# Set before anything imports numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The compiled pixel loops (models/ops/pixel_kernels.py) keep their machine code in the user's cache
# folder, not next to the code: an install folder may be read-only (a system-wide install), and
# Numba fails the import when it has nowhere to write. A user's own setting wins.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(platformdirs.user_cache_dir("FaceCast")) / "numba"))


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="folder with the model files (default: the user cache folder, or $FACECAST_MODELS_DIR)",
    )
    p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="use model files whose SHA-256 does not match the catalogue (e.g. test doubles)",
    )


def _size(text: str) -> int:
    value = _number(text, int)
    if not 16 <= value <= 8192:
        raise argparse.ArgumentTypeError(f"{text!r}: a size in pixels from 16 to 8192")
    return value


def _rate(text: str) -> float:
    value = _number(text, float)
    if not (math.isfinite(value) and 0.0 < value <= 240.0):
        raise argparse.ArgumentTypeError(f"{text!r}: frames per second above 0, up to 240")
    return value


def _count(text: str) -> int:
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1")
    return value


def _number(text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a {'whole ' if kind is int else ''}number"
        ) from None


def _output_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give vcam, window, null or a file name")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="FaceCast: real-time face swap to a virtual camera. "
        "With no command it opens the control panel (the GUI).",
        epilog="Start with `main.py doctor` to see what works on this machine, then "
        "`main.py models download default` for the face models.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="swap faces from a camera, video or image into vcam/window/file")
    run.add_argument(
        "--source",
        nargs="+",
        type=Path,
        default=None,
        metavar="PHOTO",
        help="photo(s) of the face to swap in; several photos of one person are averaged",
    )
    run.add_argument(
        "--map",
        dest="maps",
        action="append",
        default=[],
        metavar="REF_PHOTO=SOURCE_PHOTO",
        help="instead of --source: the person in REF_PHOTO becomes the person in SOURCE_PHOTO "
        "(repeatable: face A becomes X, face B becomes Y; other faces are left alone)",
    )
    run.add_argument(
        "--input",
        required=True,
        metavar="CAMERA_INDEX|VIDEO|IMAGE",
        help="a camera (0, 1, ... or /dev/videoN), a video file or stream URL, or an image",
    )
    run.add_argument(
        "--output",
        required=True,
        type=_output_name,
        metavar="vcam|window|null|FILE",
        help="the virtual camera, a preview window, nothing (null: for --stats), or a video/image file",
    )
    _add_model_args(run)
    run.add_argument(
        "--provider",
        choices=["auto", "cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"],
        default=None,
        help="ONNX Runtime execution provider (default: auto, the NVIDIA GPU or DirectML where one "
        "can run the models, else the CPU; tensorrt is faster after a first start that builds engines)",
    )
    run.add_argument("--preset", default=None, help="latency preset: ultra-low-latency, balanced, quality")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting, e.g. --set detector.interval=2 (repeatable)",
    )
    run.add_argument(
        "--detector",
        choices=["det_10g", "scrfd_2.5g", "mtcnn"],
        default=None,
        help="face detector (default: det_10g; mtcnn is built in and needs no download)",
    )
    run.add_argument(
        "--swapper",
        choices=["inswapper_128", "inswapper_128_fp16"],
        default=None,
        help="face swap model (default: the preset's; fp16 is half the download, for GPUs)",
    )
    run.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="photo of the person in the video to swap (locks onto that face)",
    )
    run.add_argument("--width", type=_size, default=None, help="camera/virtual camera width")
    run.add_argument("--height", type=_size, default=None, help="camera/virtual camera height")
    run.add_argument("--fps", type=_rate, default=None, help="camera/virtual camera fps")
    run.add_argument(
        "--vcam-backend",
        default=None,
        metavar="NAME",
        help="virtual camera driver to use: obs (Windows, macOS), unitycapture (Windows), "
        "v4l2loopback (Linux); "
        "default: the first one installed",
    )
    run.add_argument(
        "--vcam-device",
        default=None,
        metavar="DEVICE",
        help="which virtual camera device, e.g. /dev/video10 (Linux) or a Unity Capture name; "
        "default: the first free one",
    )
    run.add_argument(
        "--realtime",
        dest="realtime",
        action="store_true",
        default=None,
        help="play a video file at its own speed (default for vcam/window output)",
    )
    run.add_argument(
        "--every-frame",
        dest="realtime",
        action="store_false",
        help="process every frame of a video as fast as possible (default for file output)",
    )
    run.add_argument("--loop", action="store_true", help="loop a video/image input until stopped")
    run.add_argument(
        "--decoder",
        choices=("auto", "cpu", "nvdec"),
        default="auto",
        help="video decoding: auto = NVDEC for H.264/HEVC when the models run on an NVIDIA GPU "
        "(CPU if NVDEC cannot open the input), cpu, or nvdec (an error where it cannot)",
    )
    run.add_argument("--stats", action="store_true", help="print fps, latency and per-stage ms every second")
    run.add_argument("--label", action="store_true", help='draw a small "AI-modified" mark on the output')

    models = sub.add_parser("models", help="list, download and verify model files")
    msub = models.add_subparsers(dest="models_command", required=True)
    for name, text in (
        ("list", "catalogue and what is installed"),
        ("verify", "check every file's SHA-256"),
        ("path", "print the models folder"),
    ):
        _add_model_args(msub.add_parser(name, help=text))
    dl = msub.add_parser(
        "download", help="download NAME (or 'default'), verifying its SHA-256 where one is published"
    )
    dl.add_argument("names", nargs="+", metavar="NAME")
    dl.add_argument("--yes", action="store_true", help="accept the model licences without asking")
    _add_model_args(dl)

    doctor = sub.add_parser(
        "doctor", help="check Python packages, ONNX Runtime providers, GPU, cameras, vcam"
    )
    doctor.add_argument("--no-cameras", action="store_true", help="skip camera probing")
    doctor.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="the models folder to check (default: the user cache folder, or $FACECAST_MODELS_DIR)",
    )
    doctor.add_argument(
        "--gpu-bench",
        action="store_true",
        help="GPU self-check: stand-in models at 720p/1080p on CUDA and TensorRT fp16 (< 5 minutes)",
    )

    bench = sub.add_parser(
        "bench", help="benchmark the engine against the naive and Deep-Live-Cam-style loops"
    )
    bench.add_argument("--json", action="store_true", help="print the results as JSON")
    bench.add_argument("--frames", type=_count, default=150, help="frames per loop (default: 150)")
    bench.add_argument("--width", type=_size, default=1280, help="clip width in pixels (default: 1280)")
    bench.add_argument("--height", type=_size, default=720, help="clip height in pixels (default: 720)")
    bench.add_argument("--preset", default="balanced", help="the engine's preset (default: balanced)")
    bench.add_argument(
        "--repeat",
        type=_count,
        default=1,
        help="run the loops this many times, interleaved, and report each loop's median run and the "
        "median speed-up (steadier on a machine whose speed drifts; default: 1)",
    )
    bench.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting of the preset (repeatable)",
    )
    bench.add_argument(
        "--standins",
        action="store_true",
        help="use compute-equivalent stand-ins instead of near-zero-cost doubles",
    )
    bench.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="also run the engine live for this many seconds and report latency drift",
    )
    _add_model_args(bench)
    return parser


def open_output(args: argparse.Namespace, source: FrameSource) -> FrameSink:
    """The sink `--output` names. A virtual camera paces itself only for sources that do not: a
    camera (or a video played in real time) already delivers frames at its rate, and a second clock
    in the sink would hold each frame up to one frame period (measured: +19-33 ms p50 at 30 fps)."""
    if args.output.strip().lower() == "window":
        from gui.window_sink import WindowSink

        return WindowSink(title="FaceCast")
    from realtime.io.sinks import open_sink

    width, height = args.width, args.height
    if (width is None) != (height is None):
        # One side given: the other follows the source's shape (640 alone gave a 640x720 camera).
        src_w, src_h = source.size
        if width is None:
            width = max(16, round(height * src_w / max(src_h, 1) / 2) * 2)
        else:
            height = max(16, round(width * src_h / max(src_w, 1) / 2) * 2)
    return open_sink(
        args.output,
        width=width,
        height=height,
        fps=args.fps,
        vcam_backend=getattr(args, "vcam_backend", None),
        vcam_device=getattr(args, "vcam_device", None),
        pace=not source.is_live,
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
    from realtime.io.display import display_problem

    problem = display_problem()
    if problem is None:
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


def _settings_for_run(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from realtime.core.settings import DEFAULT_PRESET, load_preset, parse_override

    settings = load_preset(args.preset or DEFAULT_PRESET)
    overrides = dict(parse_override(o) for o in args.overrides)
    if args.provider:
        overrides["pipeline.provider"] = args.provider
    if args.detector:
        overrides["detector.model"] = args.detector
    if args.swapper:
        overrides["swap.model"] = args.swapper
    if args.reference:
        overrides["swap.target"] = "reference"
    if args.maps:
        overrides["swap.target"] = "mapped"
    if args.label:
        overrides["composite.disclosure_label"] = True
    return settings.with_overrides(overrides)


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
    from realtime.io.sources import CameraSource, FallbackSource

    inner = source.primary if isinstance(source, FallbackSource) else source
    if isinstance(inner, CameraSource):
        inner.check_present()  # Linux: is there a /dev/videoN at all (nothing is opened)
        return
    if not isinstance(getattr(inner, "path", None), Path):  # files and images have a path
        return
    source.open()
    source.close()


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.build.wiring import ModelOptions, prepare_face_swap, resolve_provider
    from realtime.core.engine import Engine, EngineEvent
    from realtime.io.nvdec import Decoder, open_input
    from realtime.io.sources import FallbackSource, camera_index
    from realtime.tools.run_control import SafeOutput, StopSignals

    check_not_an_input(args)
    if args.output.strip().lower() == "window":
        check_display()
    mappings = _parse_maps(args)
    settings = resolve_provider(_settings_for_run(args))
    live_output = args.output.strip().lower() in ("vcam", "window")
    realtime = args.realtime if args.realtime is not None else live_output
    # The input is checked before the models load (seconds, or minutes for a first TensorRT build):
    # a typo in --input must not wait for them.
    # NVDEC pays off only where the models run on the GPU too (else its frames come back to the host).
    gpu = settings.pipeline.provider in ("cuda", "tensorrt")
    decoder: Decoder = args.decoder if gpu or args.decoder == "nvdec" else "cpu"
    source, decoding = open_input(
        args.input, realtime=realtime, loop=args.loop, width=args.width, height=args.height, fps=args.fps,
        decoder=decoder,
    )  # fmt: skip
    probe_input(source)
    if decoding:
        print(f"note: {decoding}", file=out)
    if isinstance(source, FallbackSource) and source.fell_back:
        print(f"warning: {source.fell_back}; decoding on the CPU instead", file=out)
    options = ModelOptions(models_dir=args.models_dir, allow_unverified=args.allow_unverified)
    stages = prepare_face_swap(args.source or [], settings, options, args.reference, mappings)
    for note in stages.identity.notes:
        print(f"note: {note}", file=out)
    for note in stages.fallbacks:
        print(f"warning: {note}", file=out)
    sink = open_output(args, source)

    show, complain = SafeOutput(out), SafeOutput(sys.stderr)
    said: set[str] = set()

    def on_event(event: EngineEvent) -> None:
        if event.kind in ("error", "warning"):
            said.add(event.message)
            complain(f"{event.kind}: {event.message}")
        elif event.kind == "info":
            complain(f"note: {event.message}")

    engine = Engine(source, sink, settings, stages, on_event=on_event)
    window_sink: WindowSink | None = None
    if args.output.strip().lower() == "window":
        from PyQt6.QtWidgets import QApplication

        from gui.window_sink import WindowSink

        _app = QApplication.instance() or QApplication(sys.argv[:1])
        assert isinstance(sink, WindowSink)
        window_sink = sink
        window_sink.ensure_window()  # on the GUI thread, before the engine opens the sink
    # Signals only ask the run to stop (see run_control): the loops below poll for the request.
    with StopSignals(show) as signals:
        try:
            engine.start()
            show(f"running: {source.description} -> {sink.description} ({engine.stages_label}); Ctrl+C stops")
            if window_sink is not None:
                _run_window_loop(engine, window_sink, args.stats, show, signals)
            else:
                _wait_with_stats(engine, args.stats, show, signals)
        finally:
            if signals.requested:
                show("stopping ...")
            engine.stop()  # finalises the output (the wait above only watched the run end)
            if not engine.finish_output(0.5):
                # A write still running (a slow disk): exiting now would leave the recording unfinished.
                show("finishing the output ...")
                if not engine.finish_output(OUTPUT_FINISH_S):
                    show(f"warning: {sink.description} did not finish in {OUTPUT_FINISH_S:.0f} s")
    stats = engine.stats()
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
    from realtime.io.sinks import ImageFileSink

    if isinstance(sink, ImageFileSink) and stats.frames_out > 1:
        # A video into a picture: only one frame can be kept, and the user was not told which.
        show(f"note: {args.output} holds the last of the {stats.frames_out} frames (an image keeps one)")
    to_file = not live_output and args.output.strip().lower() != "null"
    if signals.requested and to_file and not args.loop and camera_index(str(args.input)) is None:
        show(f"note: stopped before the input ended: {args.output} holds its first {stats.frames_out} frames")
    if engine.error is not None:
        if engine.error.user_message() in said:
            return engine.error.exit_code  # already said while running: once is enough
        raise engine.error
    return 0


OUTPUT_FINISH_S = 30.0  # how long `run` waits for a recording still being written when it stops


def _wait_with_stats(engine, show_stats: bool, show: Callable[[str], None], signals: StopSignals) -> None:  # type: ignore[no-untyped-def]
    """Until the input ends, an error ends the run, or a signal asks to stop. Only watches: the
    caller's engine.stop() closes the output, after signals have stopped being able to cut it."""
    last = time.monotonic()
    while not engine.ended(0.0) and not signals.wait(0.1):
        if show_stats and time.monotonic() - last >= 1.0:
            last = time.monotonic()
            show(engine.stats().format_line())


def _run_window_loop(
    engine: Engine, sink: WindowSink, show_stats: bool, show: Callable[[str], None], signals: StopSignals
) -> None:
    """Run Qt's event loop until the window is closed, the engine finishes or a signal asks to stop."""
    from PyQt6.QtCore import QTimer
    from PyQt6.QtWidgets import QApplication

    app = QApplication.instance()
    assert app is not None, "create the QApplication before the window sink"
    if signals.requested:
        return  # asked to stop while starting: Qt ignores quit() before exec()
    # The loop ends through poll() below (a closed window sets `sink.closed`). Qt's own quit on the
    # last window closed fired again when the run closed the window after exec() had returned,
    # and left every later event loop of the process exiting at once.
    QApplication.setQuitOnLastWindowClosed(False)
    timer = QTimer()

    def poll() -> None:  # also gives Python the control it needs to run signal handlers
        if sink.closed.is_set() or not engine.running or signals.requested:
            app.quit()

    timer.timeout.connect(poll)
    timer.start(100)
    stats_timer = QTimer()
    if show_stats:
        stats_timer.timeout.connect(lambda: show(engine.stats().format_line()))
        stats_timer.start(1000)
    app.exec()


def cmd_models(args: argparse.Namespace, out: TextIO) -> int:
    from models.files import commands
    from models.files.store import ModelStore, default_models_dir

    store = ModelStore(args.models_dir or default_models_dir(), allow_unverified=args.allow_unverified)
    if args.models_command == "list":
        return commands.list_models(store, out)
    if args.models_command == "verify":
        return commands.verify_models(store, out)
    if args.models_command == "path":
        return commands.print_models_path(store, out)
    return commands.download_models(store, args.names, args.yes, out, sys.stdin)


def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.tools.doctor import run_doctor

    code = run_doctor(out, check_cameras=not args.no_cameras, models_dir=args.models_dir)
    if args.gpu_bench:
        from realtime.tools.gpu_bench import run_gpu_bench

        code = max(code, run_gpu_bench(out))
    return code


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.tools.bench import run_bench_cli

    return run_bench_cli(args, out)


def cmd_gui(args: argparse.Namespace, out: TextIO) -> int:
    check_display(for_gui=True)
    try:
        from gui.app import run_gui
    except ImportError as exc:
        raise FaceCastError(
            f"The control panel is not available ({exc}).",
            hint="Use `python main.py run --help` for the command line.",
        ) from exc
    return run_gui()


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.debug:
        os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    commands = {"run": cmd_run, "models": cmd_models, "doctor": cmd_doctor, "bench": cmd_bench, None: cmd_gui}
    try:
        return commands[args.command](args, out)
    except FaceCastError as exc:
        if args.debug:
            raise
        print(f"error: {exc.user_message()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    threading.current_thread().name = "main"
    sys.exit(main())
