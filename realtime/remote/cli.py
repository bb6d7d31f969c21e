"""`main.py serve` and `main.py run --remote URL`: their arguments and what they do.

main.py wires them in (see docs/REMOTE.md); this module needs only argparse namespaces.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import platformdirs

# Only light imports at the top: main.py builds its parser with these functions, and `--help`
# must not wait for the engine to import.
from realtime.remote.limits import CONTENT_MODES, Limits

if TYPE_CHECKING:
    from realtime.api import BatchPolicy
    from realtime.remote.options import RemoteOptions
from realtime.remote.tokens import new_token

DEFAULT_PORT = 8443
DEFAULT_PRESET = "balanced"
DEFAULTS = Limits()


def default_data_dir() -> Path:
    return Path(
        os.environ.get("FACECAST_SERVER_DIR") or Path(platformdirs.user_data_dir("FaceCast")) / "server"
    )


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the server's folder: certificate, token file, audit log, uploads "
        "(default: the user data folder, or $FACECAST_SERVER_DIR)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="lines name:token or name:sha256:HEX; edit it to revoke a token "
        "(default: DATA_DIR/tokens.txt, made with one new token on first start)",
    )
    parser.add_argument("--cert", type=Path, default=None, help="TLS certificate (PEM; default: self-signed)")
    parser.add_argument("--key", type=Path, default=None, help="TLS private key (PEM) for --cert")
    parser.add_argument("--no-tls", action="store_true", help="plain HTTP (only behind a TLS proxy)")
    parser.add_argument("--max-streams", type=int, default=DEFAULTS.max_streams, help="concurrent streams")
    parser.add_argument(
        "--max-session", type=float, default=DEFAULTS.max_session_s, help="seconds per stream"
    )
    parser.add_argument("--idle-timeout", type=float, default=DEFAULTS.idle_s, help="seconds without video")
    parser.add_argument(
        "--max-upload-bytes", type=int, default=DEFAULTS.max_upload_bytes, help="largest source photo"
    )
    parser.add_argument(
        "--max-upload-pixels", type=int, default=DEFAULTS.max_upload_pixels, help="largest photo in pixels"
    )
    parser.add_argument("--provider", default="auto", help="ONNX Runtime provider for every stream")
    parser.add_argument(
        "--max-batch",
        type=int,
        default=8,
        metavar="N",
        help="faces of all streams the swapper takes in one call at most (default: 8; 1: no batching)",
    )
    parser.add_argument(
        "--batch-delay-us",
        type=int,
        default=1000,
        metavar="US",
        help="how long a face waits for other streams' faces to join its call, at most (default: 1000; "
        "a lone stream never waits)",
    )
    parser.add_argument(
        "--max-bitrate",
        type=int,
        default=None,
        metavar="KBPS",
        help="the most video a stream sends back, in kbit/s (default: what the picture's size needs "
        "for a clean picture: 2000 at 640x480, 3000 at 1280x720; less when the link carries less)",
    )
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="preset a stream gets unless it names one")
    parser.add_argument(
        "--no-watermark",
        action="store_true",
        help="send the streams' frames without FaceCast's invisible watermark (on by default; a "
        "client cannot turn it off; docs/PROVENANCE.md)",
    )
    parser.add_argument(
        "--content-policy",
        choices=CONTENT_MODES,
        default="off",
        help="an NSFW classifier (model nsfw_2) on uploaded photos and one frame a second of each "
        "stream: log writes its verdicts to the audit log, refuse also turns such photos away and "
        "ends such streams (default: off)",
    )
    if not any("--models-dir" in a.option_strings for a in parser._actions):
        parser.add_argument("--models-dir", type=Path, default=None, help="folder with the model files")
        parser.add_argument("--allow-unverified", action="store_true", help="use unverified model files")


def run_serve(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.api import FaceCastError, InferenceHub, ModelOptions
    from realtime.remote.runner import start_site
    from realtime.remote.server import Server, ServerConfig
    from realtime.remote.tls import ensure_certificate, server_context

    data_dir: Path = args.data_dir or default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    token_file = args.token_file or data_dir / "tokens.txt"
    if not token_file.exists():
        token = new_token()
        token_file.write_text(f"# name:token, one a line; delete a line to revoke it\nfirst:{token}\n")
        token_file.chmod(0o600)
        print(f"new token file {token_file}; its token: {token}", file=out)
    limits = Limits(
        max_streams=args.max_streams,
        max_session_s=args.max_session,
        idle_s=args.idle_timeout,
        max_upload_bytes=args.max_upload_bytes,
        max_upload_pixels=args.max_upload_pixels,
    )
    config = ServerConfig(
        data_dir=data_dir,
        token_file=token_file,
        limits=limits,
        models=ModelOptions(
            models_dir=args.models_dir,
            allow_unverified=args.allow_unverified,
            inference=InferenceHub(_batch_policy(args.max_batch, args.batch_delay_us)),
        ),
        provider=args.provider,
        default_preset=args.preset,
        max_bitrate=_bitrate(getattr(args, "max_bitrate", None)),
        content_policy=getattr(args, "content_policy", "off"),
        watermark=not getattr(args, "no_watermark", False),
    )
    if not config.watermark:
        print("warning: --no-watermark: the streams' frames carry no invisible watermark; nothing "
              "in them says they are AI-modified once the visible label is off or cropped",
              file=out)  # fmt: skip
    tls = None
    if args.no_tls:
        print("warning: --no-tls: tokens and session setup travel in clear text; use it only behind "
              "a TLS-terminating proxy or on a trusted network", file=out)  # fmt: skip
    else:
        if (args.cert is None) != (args.key is None):
            raise FaceCastError("--cert and --key go together.")
        if args.cert is not None:
            from realtime.remote.tls import fingerprint_of_pem

            tls = server_context(args.cert, args.key)
            fingerprint = fingerprint_of_pem(args.cert.read_text(encoding="ascii"))
        else:
            cert = ensure_certificate(data_dir)
            tls = server_context(cert.cert, cert.key)
            fingerprint = cert.fingerprint
            if cert.generated:
                print(f"made a self-signed certificate in {data_dir}", file=out)
        print(f"certificate SHA-256 fingerprint: {fingerprint}", file=out)
    scheme = "http" if args.no_tls else "https"
    server = Server(config)
    if config.content_policy != "off":
        print(f"content policy: {config.content_policy} (verdicts in {server.audit.path})", file=out)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
        try:
            runner = await start_site(server, args.host, args.port, tls)
        except OSError as exc:
            raise FaceCastError(f"Cannot listen on {args.host}:{args.port}: {exc.strerror}.") from exc
        print(f"serving on {scheme}://{args.host}:{args.port} (max {limits.max_streams} streams); "
              "Ctrl+C stops", file=out, flush=True)  # fmt: skip
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(serve())
    print("stopped", file=out)
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > 0 and value != float("inf")):  # nan fails the first test
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds above 0")
    return value


def add_remote_arguments(parser: argparse.ArgumentParser, *, with_consent: bool = True) -> None:
    """`with_consent=False`: the parser declares `--consent` itself (main.py's `run` does)."""
    group = parser.add_argument_group("remote GPU (run --remote)")
    group.add_argument("--remote", metavar="URL", default=None, help="run the swap on a `serve` server")
    group.add_argument("--token", default=None, help="the server's bearer token (or $FACECAST_TOKEN)")
    group.add_argument("--token-file", type=Path, default=None, help="a file holding the token")
    group.add_argument("--pin-fingerprint", default=None, metavar="SHA256", help="the certificate to expect")
    group.add_argument(
        "--known-hosts",
        type=Path,
        default=None,
        help="trust-on-first-use store (default: user config folder)",
    )
    if with_consent:
        group.add_argument(
            "--consent",
            action="store_true",
            help="confirm you have the consent of the person in the source photo "
            "(the server refuses without)",
        )
    group.add_argument("--reconnect-for", type=float, default=120.0, help="give up after this many s down")
    group.add_argument(
        "--max-bitrate",
        type=int,
        default=None,
        metavar="KBPS",
        help="the most video the call sends each way, in kbit/s (default: what the picture's size "
        "needs for a clean picture: 2000 at 640x480, 3000 at 1280x720; less when the link carries less)",
    )
    group.add_argument(
        "--duration", type=_seconds, default=None, metavar="S", help="stop after S seconds (local runs too)"
    )


def _batch_policy(max_batch: int, delay_us: int) -> BatchPolicy:
    from realtime.api import BatchPolicy, FaceCastError

    if not 1 <= max_batch <= 64:
        raise FaceCastError(f"--max-batch {max_batch} is out of range.", hint="Give 1 (no batching) to 64.")
    if not 0 <= delay_us <= 100_000:
        raise FaceCastError(f"--batch-delay-us {delay_us} is out of range.", hint="Give 0 to 100000.")
    return BatchPolicy(max_batch=max_batch, max_delay_us=delay_us)


def _bitrate(kbps: int | None) -> int | None:
    from realtime.api import FaceCastError

    if kbps is None:
        return None
    if kbps < 150:
        raise FaceCastError(f"--max-bitrate {kbps} is too low.", hint="Give kbit/s: 150 or more (e.g. 2000).")
    return kbps * 1000


def _read_token(args: argparse.Namespace) -> str:
    from realtime.api import FaceCastError

    token = getattr(args, "token", None) or os.environ.get("FACECAST_TOKEN")
    path: Path | None = getattr(args, "token_file", None)
    if not token and path is not None:
        try:
            lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines()]
        except OSError as exc:
            raise FaceCastError(f"--token-file {path} cannot be read ({exc.strerror}).") from exc
        first = next((x for x in lines if x and not x.startswith("#")), "")
        token = first.split(":", 1)[1] if ":" in first else first
    if not token:
        raise FaceCastError(
            "No token for the server.", hint="Pass --token T, --token-file FILE or set $FACECAST_TOKEN."
        )
    return token


def _overrides(args: argparse.Namespace) -> tuple[str, ...]:
    values = list(getattr(args, "overrides", None) or [])
    flags: dict[str, Any] = {
        "detector.model": getattr(args, "detector", None),
        "swap.model": getattr(args, "swapper", None),
        "frame_enhancer.model": getattr(args, "frame_enhancer", None),
    }
    values += [f"{k}={v}" for k, v in flags.items() if v]
    if getattr(args, "label", False):
        values.append("composite.disclosure_label=true")
    return tuple(values)


def console(out: TextIO) -> Callable[[str], None]:
    """Print a line to `out` at once; a closed console must not stop the run."""

    def say(line: str) -> None:
        with contextlib.suppress(ValueError, OSError):
            print(line, file=out, flush=True)

    return say


def remote_options(args: argparse.Namespace) -> RemoteOptions:
    """What `run --remote` asks of the server, from its arguments (refused with a FaceCastError
    naming the argument to fix)."""
    from realtime.api import FaceCastError, new_run_id
    from realtime.remote.options import RemoteOptions

    photos = tuple(getattr(args, "source", None) or ())
    if not photos:
        raise FaceCastError("No source photo given.", hint="Pass --source PHOTO.")
    if not getattr(args, "consent", False):
        raise FaceCastError(
            "The server needs your confirmation of consent.",
            hint="Pass --consent if the person in the source photo agreed and viewers are told.",
        )
    if args.output.strip().lower() == "window":
        raise FaceCastError("--remote sends to vcam, a file or null.", hint="Use --output vcam.")
    return RemoteOptions(
        url=args.remote,
        token=_read_token(args),
        photos=photos,
        preset=getattr(args, "preset", None),
        overrides=_overrides(args),
        consent=True,
        pinned=getattr(args, "pin_fingerprint", None),
        known_hosts=getattr(args, "known_hosts", None),
        reconnect_for_s=getattr(args, "reconnect_for", 120.0),
        duration_s=getattr(args, "duration", None),
        max_bitrate=_bitrate(getattr(args, "max_bitrate", None)),
        run_id=new_run_id(),  # the frames' watermark and the local recording's manifest name it
    )


def run_remote(args: argparse.Namespace, out: TextIO) -> int:
    """`run --remote URL`: the local input to the server, the swapped video to the local output,
    live (a video file is played at its rate; a video file into a video file, every frame of it,
    is realtime.jobs.remote_file's). A call a signal ended exits as a local run does (130 for
    Ctrl+C, 143 for `kill`, 129 for a closed terminal), its output finished."""
    from realtime.api import open_input, open_output
    from realtime.remote.client import RemoteClient
    from realtime.remote.client_run import run_call
    from realtime.remote.errors import RemoteError

    say = console(out)
    try:
        options = remote_options(args)
        width, height, fps = (getattr(args, k, None) for k in ("width", "height", "fps"))
        source, _ = open_input(
            str(args.input), realtime=True, loop=getattr(args, "loop", False), width=width, height=height,
            fps=fps, decoder="cpu",
        )  # fmt: skip
        sink = open_output(
            args.output, width=width, height=height, fps=fps, pace=not source.is_live,
            vcam_backend=getattr(args, "vcam_backend", None), vcam_device=getattr(args, "vcam_device", None),
            run_id=options.run_id,
        )  # fmt: skip
        client = RemoteClient(options, source, sink, say)
        client.open()  # the input's real size and rate for the line below
        say(f"running: {source.description} -> {args.remote} -> {sink.description}; Ctrl+C stops")
        stats, code = run_call(client, say)
    except RemoteError as exc:
        say(f"error: {exc.user_message()}")
        return exc.exit_code
    lat = stats.latency_ms
    say(
        f"done: {stats.frames_out} frames out ({stats.remote_frames} swapped by the server, "
        f"{stats.reconnecting_frames} while reconnecting), {stats.connects} connection(s); "
        f"glass-to-glass p50 {lat.p50:.0f} / p99 {lat.p99:.0f} ms (network included)"
    )
    return code  # 0, or a signal's: hung up and finished, yet a signal ended it


def main(argv: list[str] | None = None) -> int:
    """`python -m realtime.remote serve ...`: the server without main.py (containers, tests)."""
    parser = argparse.ArgumentParser(prog="python -m realtime.remote")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_arguments(sub.add_parser("serve", help="run the remote GPU server"))
    args = parser.parse_args(argv)
    from realtime.api import FaceCastError

    try:
        return run_serve(args, sys.stdout)
    except FaceCastError as exc:
        print(f"error: {exc.user_message()}", file=sys.stderr)
        return exc.exit_code
