"""The command line's arguments: the parser of main.py and its value checks."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from models.files.catalogue import names_of_role
from realtime.remote.cli import add_remote_arguments, add_serve_arguments
from realtime.tools.cli_jobs_args import add_jobs_arguments, chunk_seconds


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
        choices=names_of_role("swapper"),
        default=None,
        metavar="MODEL",
        help="face swap model (default: inswapper_128): "
        + ", ".join(names_of_role("swapper"))
        + "; `models list` shows each one's crop size, download and licence",
    )
    run.add_argument(
        "--frame-enhancer",
        choices=names_of_role("frame_enhancer"),
        default=None,
        metavar="MODEL",
        help="whole-frame super-resolution after the faces: "
        + ", ".join(names_of_role("frame_enhancer"))
        + " (kept at the input's size; --set frame_enhancer.upscale=true makes a file that many "
        "times larger)",
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
    label = run.add_mutually_exclusive_group()
    label.add_argument(
        "--label",
        dest="label",
        action="store_true",
        default=None,
        help='draw a small "AI-modified" mark on the output (the default for vcam and window)',
    )
    label.add_argument(
        "--no-label",
        dest="label",
        action="store_false",
        help="leave the disclosure mark off a vcam or window output (tell the viewers yourself)",
    )
    run.add_argument(
        "--consent",
        action="store_true",
        help="confirm you have the consent of every person whose face you use (asked once, then stored; "
        "or set FACECAST_CONSENT=1); also sent to a `--remote` server",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace an output file that exists (default: refuse it)"
    )
    run.add_argument(
        "--chunk-seconds",
        type=chunk_seconds,
        default=4.0,
        metavar="S",
        help="a video file into a video file is processed in chunks of about S seconds, cut at "
        "keyframes, and resumes from the last finished one when run again (0: one chunk; default: 4)",
    )
    add_remote_arguments(run, with_consent=False)

    add_serve_arguments(
        sub.add_parser("serve", help="serve the face swap to `run --remote` clients and browsers (WebRTC)")
    )

    verify = sub.add_parser(
        "verify",
        help="say whether a video or picture carries FaceCast's watermark and a C2PA manifest "
        "(exit 0: marked, 21: no mark found, 22: unreadable)",
    )
    verify.add_argument(
        "file", metavar="FILE|-", help="a video, a picture or a screen capture; - reads standard input"
    )
    verify.add_argument("--json", action="store_true", help="print the findings as JSON")

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
    doubles = msub.add_parser(
        "doubles", help="write contract-exact test doubles of the models into DIR (for tests, offline)"
    )
    doubles.add_argument("dir", type=Path, metavar="DIR")

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
        "--allow-unverified",
        action="store_true",
        help="files whose SHA-256 is not the published one (e.g. test doubles): a warning, not a failure",
    )
    doctor.add_argument(
        "--gpu-bench",
        action="store_true",
        help="GPU self-check: stand-in models at 720p/1080p on CUDA and TensorRT fp16 (< 5 minutes)",
    )

    add_jobs_arguments(sub, _add_model_args)

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
        help="also run the engine live for this many seconds and report latency drift; --service: "
        "seconds per run (default: 10); --remote: also hold one 1280x720 stream this long",
    )
    bench.add_argument(
        "--jobs",
        action="store_true",
        help="measure file jobs: one long clip as one pass, in chunks, and with 2 worker processes "
        "(throughput, chunk overhead, landmark continuity at the seams); uses --frames, --width, --height",
    )
    bench.add_argument(
        "--remote",
        action="store_true",
        help="measure the latency the remote path adds over the local engine (server and client on loopback)",
    )
    bench.add_argument(
        "--service",
        action="store_true",
        help="measure the shared inference service: streams in phase at 30 fps, one shared service vs "
        "a service each (calls/s, faces per call, throughput, the latency it adds); see --streams",
    )
    bench.add_argument(
        "--picture",
        action="store_true",
        help="measure the picture stages: Poisson blending per face and its edge's steadiness, the "
        "frame enhancer per frame at 720p and 1080p (doubles; with --standins also Real-ESRGAN x2's "
        "stand-in, minutes on a CPU)",
    )
    bench.add_argument(
        "--swappers",
        action="store_true",
        help="measure every swap family: ms per face at batch 1 and batch 4 (doubles; inswapper also on "
        "its compute-equivalent stand-in)",
    )
    bench.add_argument(
        "--streams",
        default="1,2,4",
        metavar="N[,N...]",
        help="--service: the numbers of streams to run (default: 1,2,4)",
    )
    bench.add_argument(
        "--swapper",
        default="inswapper_128",
        choices=names_of_role("swapper"),
        metavar="MODEL",
        help="--service: the swap model (default: inswapper_128)",
    )
    bench.add_argument("--max-batch", type=_count, default=8, help="--service: faces per model call at most")
    bench.add_argument(
        "--watermark",
        action="store_true",
        help="measure the invisible watermark: cost per frame, PSNR, detection after codecs and edits, "
        "false positives on unmarked video and noise (see --clips, --decisions)",
    )
    bench.add_argument("--clips", type=_count, default=8, help="--watermark: clips per edit and size")
    bench.add_argument(
        "--decisions", type=_count, default=1000, help="--watermark: decisions on unmarked input"
    )
    bench.add_argument(
        "--max-delay-us", type=int, default=1000, help="--service: the batch window's deadline"
    )
    _add_model_args(bench)
    _add_leak_args(run, bench)
    return parser


class _SettingFlag(argparse.Action):
    """A flag that stands for one `--set` override (the run builds settings from those alone)."""

    def __init__(self, *args: Any, setting: str, **kwargs: Any) -> None:
        self.setting = setting
        super().__init__(*args, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, opt: Any = None
    ) -> None:
        overrides = list(getattr(ns, "overrides", None) or [])
        ns.overrides = [*overrides, f'{self.setting}="{value}"']


def _add_leak_args(run: argparse.ArgumentParser, bench: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--recognizer",
        choices=["arcface", "dlib"],
        action=_SettingFlag,
        setting="swap.recognizer",
        dest="recognizer",
        help="who is who for --reference and --map: arcface (default) or dlib (pip install dlib-bin)",
    )
    bench.add_argument(
        "--leaks",
        action="store_true",
        help="count frames where a face that should be swapped shows unswapped, and wrong-person swaps",
    )
    bench.add_argument(
        "--leaks-detector",
        choices=["scripted", "mtcnn"],
        default="mtcnn",
        help="bench --leaks: the real MTCNN (default) or a detector scripted from the scenes' truth",
    )
