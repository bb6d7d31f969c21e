"""Association of the tracker: detections matched to tracks, and which tracks are crowded by
another face's head (whose edge can drag their flow)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from models.types import Detection, FloatArray
from realtime.face.tracking.geometry import (
    MATCH_IOU,
    box_from_kps,
    centre,
    crowded_bound,
    grown,
    iou_matrix,
    nearest_on_path,
    spread,
)
from realtime.face.tracking.state import FlowResult, Track

_HEAD = 2.0  # a face box grown by this much covers the head around it (hair, ears, neck)


def match_by_iou(predicted: Sequence[FloatArray], detections: Sequence[Detection]) -> dict[int, int]:
    """Track index -> detection index: the Hungarian assignment on the boxes' IoU, pairs with at
    least MATCH_IOU overlap only."""
    if not predicted or not detections:
        return {}
    iou = iou_matrix(np.array(predicted), np.array([d.box for d in detections]))
    rows, cols = linear_sum_assignment(-iou)
    return {int(r): int(c) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= MATCH_IOU}


def match_along_paths(
    tracks: Sequence[Track],
    detections: list[Detection],
    usable: list[FlowResult | None],
    predicted: list[FloatArray],
    matches: dict[int, int],
) -> dict[int, int]:
    """Detections left over matched to coasting tracks anywhere on the way from where each was
    last seen to where it coasted: a face that stopped (or slowed) once hidden behind someone is
    found short of its coasted position, and matched only there it came back under a new id
    (a locked target let go). Checked after the usual match, so a face in view keeps its own."""
    free_dets = [j for j in range(len(detections)) if j not in matches.values()]
    coasting = [
        i
        for i, track in enumerate(tracks)
        if i not in matches and usable[i] is None and track.missed > 0 and track.seen_kps is not None
    ]
    if not free_dets or not coasting:
        return {}
    det_boxes = np.array([detections[j].box for j in free_dets], dtype=np.float32)
    iou = np.zeros((len(coasting), len(free_dets)), dtype=np.float64)
    for r, i in enumerate(coasting):
        track = tracks[i]
        assert track.seen_kps is not None
        start, end = box_from_kps(track.seen_kps, track.rel_box), predicted[i]
        for c in range(len(free_dets)):
            iou[r, c] = iou_matrix(nearest_on_path(start, end, det_boxes[c])[None, :], det_boxes[c : c + 1])[
                0, 0
            ]
    rows, cols = linear_sum_assignment(-iou)
    return {
        coasting[int(r)]: free_dets[int(c)] for r, c in zip(rows, cols, strict=True) if iou[r, c] >= MATCH_IOU
    }


def mark_crowded(tracks: Sequence[Track], flows: Sequence[FlowResult | None]) -> None:
    """Flag the tracks whose face box a seen face's head (its box grown by _HEAD) reaches into
    while that head moves differently from this face's flow or from the speed it had (or a flow
    failed): only then can that head's edge slide over the face's points. Heads that move
    together (a camera pan or shake over two people side by side) are not crowded once their
    speeds are learned, so they cost no extra detections."""
    for track in tracks:
        track.crowded = False
    if len(tracks) < 2:
        return
    faces = np.array([box_from_kps(t.raw_kps, t.rel_box) for t in tracks])
    heads = np.array([grown(box, _HEAD) for box in faces])
    touching = iou_matrix(faces, heads) > 0.0
    np.fill_diagonal(touching, False)
    steps = [
        centre(flow.kps) - centre(track.raw_kps) if flow is not None and flow.ok else None
        for track, flow in zip(tracks, flows, strict=True)
    ]
    for i, j in zip(*np.nonzero(touching), strict=True):
        if tracks[j].missed > 0:
            continue  # a lost track is a guess, not a head anyone can see
        mine, theirs = steps[i], steps[j]
        track = tracks[i]
        apart = crowded_bound(track.raw_kps)
        if (
            mine is None
            or theirs is None
            or float(np.linalg.norm(mine - theirs)) > apart
            # A flow dragged whole by the head in front moves with it: it is not moving
            # together unless the face was already moving that way.
            or float(np.linalg.norm(track.velocity - theirs)) > apart
        ):
            track.crowded = True


def flow_continues(track: Track, flow: FlowResult) -> bool:
    """Whether the flow's step agrees with the track's recent speed (for a face the detector missed:
    an occluder passing in front moves its own way)."""
    if not flow.ok:
        return False
    step = centre(flow.kps) - centre(track.raw_kps)
    # Next to another head the flow is doubted sooner: its edge drags the points by a few pixels a
    # frame (a fifth of the loose bound), a drift that adds up while hidden.
    loose = max(3.0, 0.25 * spread(track.raw_kps))
    allowed = crowded_bound(track.raw_kps) if track.crowded else loose
    return float(np.linalg.norm(step - track.velocity)) <= allowed


__all__ = ["flow_continues", "mark_crowded", "match_along_paths", "match_by_iou"]
