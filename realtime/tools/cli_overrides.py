"""The settings a command's `--set` and flags name, checked together (run, jobs batch, jobs submit)."""

from __future__ import annotations

import argparse
from typing import Any


def checked_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """`--set` values, each checked (a bogus value is refused even where a flag would replace it),
    with the flags that name a setting (--provider, --detector, --swapper, --frame-enhancer) over
    them. A flag and a
    `--set` that disagree are refused: one of them would be dropped without a word."""
    from realtime.core.settings import DEFAULT_PRESET, SettingsError, load_preset, parse_override

    overrides = dict(parse_override(o) for o in args.overrides)
    load_preset(args.preset or DEFAULT_PRESET).with_overrides(overrides).validate()
    flags = {
        "pipeline.provider": ("--provider", args.provider),
        "detector.model": ("--detector", args.detector),
        "swap.model": ("--swapper", args.swapper),
        "frame_enhancer.model": ("--frame-enhancer", getattr(args, "frame_enhancer", None)),
    }
    for key, (flag, value) in flags.items():
        if not value:
            continue
        if key in overrides and str(overrides[key]) != str(value):
            raise SettingsError(
                f"--set {key}={overrides[key]} and {flag} {value} disagree.",
                hint="Give one of them.",
            )
        overrides[key] = value
    return overrides
