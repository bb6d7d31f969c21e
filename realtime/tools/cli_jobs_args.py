"""The arguments of `main.py jobs ...` (file jobs in batches and on a queue)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _add_job_options(
    p: argparse.ArgumentParser, add_model_args: Callable[[argparse.ArgumentParser], None]
) -> None:
    p.add_argument(
        "--source",
        nargs="+",
        type=Path,
        default=None,
        metavar="PHOTO",
        help="photo(s) of the face to swap in",
    )
    p.add_argument("--map", dest="maps", action="append", default=[], metavar="REF_PHOTO=SOURCE_PHOTO")
    p.add_argument("--reference", type=Path, default=None, help="photo of the person in the videos to swap")
    p.add_argument("--preset", default=None, help="latency preset: ultra-low-latency, balanced, quality")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--provider", default=None, help="ONNX Runtime execution provider (default: auto)")
    p.add_argument("--detector", choices=["det_10g", "scrfd_2.5g", "mtcnn"], default=None)
    p.add_argument("--swapper", choices=["inswapper_128", "inswapper_128_fp16"], default=None)
    p.add_argument("--label", action="store_true", help='draw a small "AI-modified" mark on the output')
    p.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    p.add_argument("--chunk-seconds", type=float, default=4.0, metavar="S", help="chunk length (default: 4)")
    add_model_args(p)


def add_jobs_arguments(sub: Any, add_model_args: Callable[[argparse.ArgumentParser], None]) -> None:
    jobs = sub.add_parser("jobs", help="video files in, video files out: many at once (docs/JOBS.md)")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    batch = jsub.add_parser(
        "batch",
        help="run many file jobs here, each on its own, with a summary at the end",
        description='Either --jobs FILE (JSON: [{"input": ..., "output": ..., "source": ...}]) or '
        "--targets FOLDER --output-dir FOLDER with one --source for every video in the folder.",
    )
    group = batch.add_mutually_exclusive_group(required=True)
    group.add_argument("--jobs", type=Path, metavar="FILE", help="a JSON jobs file")
    group.add_argument("--targets", type=Path, metavar="FOLDER", help="every video in this folder")
    batch.add_argument("--output-dir", type=Path, default=None, metavar="FOLDER", help="with --targets")
    _add_job_options(batch, add_model_args)
