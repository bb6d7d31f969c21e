"""`main.py models`, `doctor` and `bench`: each command's work, behind the entry point's dispatch."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from models.files.model_entry import ModelEntry


def cmd_models(args: argparse.Namespace, out: TextIO) -> int:
    if args.models_command == "doubles":
        return write_doubles(args, out)
    from models.files import commands
    from models.files.store import ModelStore, default_models_dir

    store = ModelStore(args.models_dir or default_models_dir(), allow_unverified=args.allow_unverified)
    if args.models_command == "list":
        return commands.list_models(store, out, model_note)
    if args.models_command == "verify":
        return commands.verify_models(store, out)
    if args.models_command == "path":
        return commands.print_models_path(store, out)
    return commands.download_models(store, args.names, args.yes, out, sys.stdin)


def model_note(entry: ModelEntry) -> str:
    """`models list`'s note: a swapper's family, crop and converter."""
    if entry.role != "swapper":
        return ""
    from models.wrappers.swappers.registry import swapper_info

    info = swapper_info(entry.name)
    needs = f" + {', '.join(info.requires)}" if info.requires else ""
    return f"{info.family} {info.crop} px{needs}"


def write_doubles(args: argparse.Namespace, out: TextIO) -> int:
    """The contract-exact doubles of every catalogue model, written into `args.dir` under the
    catalogue's file names (what `python -m models.fakes.doubles DIR` writes)."""
    from models.fakes.doubles import write_all

    for name, path in write_all(args.dir).items():
        print(f"{name}: {path} ({path.stat().st_size:,} bytes)", file=out)
    return 0


def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.tools.doctor import run_doctor

    code = run_doctor(
        out,
        check_cameras=not args.no_cameras,
        models_dir=args.models_dir,
        allow_unverified=args.allow_unverified,
    )
    if args.gpu_bench:
        from realtime.tools.gpu_bench import run_gpu_bench

        code = max(code, run_gpu_bench(out))
    return code


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    if getattr(args, "watermark", False):
        from realtime.tools.bench_watermark import run_watermark_bench_cli

        return run_watermark_bench_cli(args.clips, args.decisions, out)
    if getattr(args, "service", False):
        from realtime.tools.bench_service import run_service_bench_cli

        return run_service_bench_cli(args, out)
    if getattr(args, "picture", False):
        from realtime.tools.bench_picture import run_picture_bench_cli

        return run_picture_bench_cli(args, out)
    if getattr(args, "swappers", False):
        from realtime.tools.bench_swappers import run_swappers_bench_cli

        return run_swappers_bench_cli(args, out)
    if getattr(args, "leaks", False):
        from realtime.tools.bench_leaks import run_leak_bench_cli

        return run_leak_bench_cli(args, out)
    if args.remote:
        from realtime.remote.bench import run_remote_bench_cli

        return run_remote_bench_cli(args, out)
    from realtime.tools.bench import run_bench_cli

    return run_bench_cli(args, out)


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from realtime.remote.cli import run_serve

    return run_serve(args, out)


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    """`main.py verify FILE|-`: the watermark and the C2PA manifest of a video or picture."""
    import json
    import sys
    from dataclasses import asdict
    from pathlib import Path

    from realtime.io.media_check import check_media, check_media_bytes

    if args.file == "-":
        result = check_media_bytes(sys.stdin.buffer.read())
    else:
        result = check_media(Path(args.file).expanduser())
    if args.json:
        found = asdict(result)
        found["marked"] = result.marked
        out.write(json.dumps(found, indent=2, default=str) + "\n")
    else:
        out.write("\n".join(result.lines()) + "\n")
    return result.exit_code
