"""Which settings changes need new model sessions, and what running stages may be handed meanwhile."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from realtime.core.settings import Provider, Settings

# The settings the loaded models are built for: a change to any of them loads new stages in the
# background. Everything else (thresholds, smoothing, blending, ...) applies at the next frame.
MODEL_FIELDS: tuple[tuple[str, str], ...] = (
    ("detector", "model"),
    ("detector", "size"),
    ("swap", "model"),
    ("swap", "recognizer"),
    ("enhancer", "model"),
    ("frame_enhancer", "model"),
    ("masks", "occlusion"),
    ("masks", "regions"),
    ("pipeline", "provider"),
    ("pipeline", "fp16"),
    ("pipeline", "frames_in_flight"),
)


# The model fields the analysis (detection, tracking, target choice) is built on. A reload that
# changes none of them keeps the running analyser, with its tracks.
ANALYSIS_FIELDS: tuple[tuple[str, str], ...] = (
    ("detector", "model"),
    ("detector", "size"),
    ("swap", "recognizer"),  # who is who: the target choice is built on it
    ("pipeline", "provider"),
    ("pipeline", "fp16"),
)


def _differ(
    old: Settings, new: Settings, fields: tuple[tuple[str, str], ...], auto_provider: Provider | None
) -> bool:
    old, new = _as_run(old, auto_provider), _as_run(new, auto_provider)
    return any(
        getattr(getattr(old, section), key) != getattr(getattr(new, section), key) for section, key in fields
    )


def _as_run(settings: Settings, auto_provider: Provider | None) -> Settings:
    """`auto` as what it runs on here (`auto_provider`, where known), so switching between `auto`
    and the provider it picks (the control panel's list) reloads nothing."""
    if settings.pipeline.provider != "auto" or auto_provider is None:
        return settings
    return replace(settings, pipeline=replace(settings.pipeline, provider=auto_provider))


def needs_reload(old: Settings, new: Settings, auto_provider: Provider | None = None) -> bool:
    """Changes that need new model sessions (loaded in the background). MTCNN has no input size:
    a detector.size change under it reloads nothing. `auto_provider`: what the
    provider "auto" runs on here (None: not known, "auto" is compared as written)."""
    if old.detector.model == new.detector.model == "mtcnn" and old.detector.size != new.detector.size:
        new = replace(new, detector=replace(new.detector, size=old.detector.size))
    return _differ(old, new, MODEL_FIELDS, auto_provider)


def analysis_differs(old: Settings, new: Settings, auto_provider: Provider | None = None) -> bool:
    """Whether the analysis models (detector, recogniser) differ; MTCNN's size is no difference."""
    if old.detector.model == new.detector.model == "mtcnn" and old.detector.size != new.detector.size:
        new = replace(new, detector=replace(new.detector, size=old.detector.size))
    return _differ(old, new, ANALYSIS_FIELDS, auto_provider)


def for_loaded_models(latest: Settings, built: Settings, auto_provider: Provider | None = None) -> Settings:
    """`latest`, but with the model fields as `built` has them: what running stages may be handed
    while a reload is pending (or after one failed). Handed new model settings, the old workers
    would load those models inline, on every worker, freezing the output for the whole load."""
    if not needs_reload(built, latest, auto_provider):
        return latest
    sections: dict[str, Any] = {}
    for section, key in MODEL_FIELDS:
        value = getattr(getattr(built, section), key)
        current = sections.get(section, getattr(latest, section))
        if getattr(current, key) != value:
            sections[section] = replace(current, **{key: value})
    return replace(latest, **sections)


def load_wanted(
    new: Settings,
    old: Settings,
    on_its_way: Settings | None,
    built: Settings | None,
    failed: tuple[Settings, float] | None,
    now: float,
    retry_s: float,
    auto_provider: Provider | None = None,
) -> bool:
    """Whether settings changed from `old` to `new` start a model load. Compared with what runs
    (`built`), is being loaded or has just loaded (`on_its_way`), not with the last request:
    choosing again a model whose load failed (`failed`: what, when) tries it again -- but not at
    every slider move within `retry_s` of the failure (each would retry the load and report the
    failure again)."""
    # Back to the failed choice while another loads is a choice, not a slider move: without it the
    # other model would run while the settings (and the window) name the failed one.
    retrying_too_soon = (
        failed is not None
        and on_its_way is None
        and now - failed[1] < retry_s
        and not needs_reload(failed[0], new, auto_provider)
    )
    if retrying_too_soon:
        return False
    base = on_its_way or built
    if base is not None:
        return needs_reload(base, new, auto_provider)
    # Nothing built and nothing loading after a failed first load: any choice loads (passthrough
    # until then). Compared with `old`, the run would stay in passthrough, never retrying the choice.
    return failed is not None or needs_reload(old, new, auto_provider)
