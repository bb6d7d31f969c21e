"""Frame-skipping face tracker: full detection every K frames, optical flow in between.

Why: a face detector costs tens of ms per frame on a CPU (MTCNN ~150 ms at 640x480 on 2 cores)
and a few ms on a GPU, while the five landmarks the swapper needs move only a few pixels between
frames. Peers either detect every frame (slow) or reuse a stale detection for several frames (the
swapped face slides and jitters: Deep-Live-Cam #767 #981 #1610). Here:

* Every `interval` frames (or at once when a track fails or is lost) the detector runs and its
  faces are associated with the existing tracks by IoU (Hungarian), so track ids stay stable and a
  chosen target can be locked (realtime/face/targets.py).
* In between, each track's 5 landmarks plus a few corner points inside its face box are carried
  forward with pyramidal Lucas-Kanade flow on a small grey copy of the frame. The flow is checked
  (forward-backward error, a RANSAC similarity fit, the landmarks' spread against the previous
  box) and a failed check triggers a detection on the same frame, so a cut or an occluder never
  drags the face along.
* Landmarks are smoothed per track with a One-Euro filter (no jitter when still, little lag when
  moving); the box is rebuilt around the smoothed landmarks from the last detection's box shape.
* `swap_weight` fades between 1 (swap) and 0 (passthrough) over `fade_frames` when the tracking
  quality or detector score crosses its threshold, so the switch never pops.
* A face with another head over it that moves another way is "crowded": that head's edge can
  drag its flow points, so while crowded its speed is learned only from flow a detection confirms,
  and a flow that strays from that speed asks the detector (a still face with someone walking
  past in front keeps its swap in place and its id, instead of sliding with the passer-by and
  coasting away once hidden). A hidden face coasts at the speed it had; found again short of
  where it coasted to (it stopped behind someone), it is matched anywhere on that way back.
* A scene cut (every track's flow failed and most of the picture changed) starts afresh: the old
  tracks would otherwise coast on as ghost swaps over the new shot, or hand their id (and the
  target lock) to whoever now stands where they were. Faces found on the cut frame are swapped at
  once (the cut itself is the change a fade would hide).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from models.types import Detection, FloatArray, ImageBGR
from realtime.core.settings import Settings, TrackerSettings
from realtime.face.one_euro import OneEuroFilter

GreyImage = npt.NDArray[np.uint8]
Affine = npt.NDArray[np.float64]  # 2x3
DetectFn = Callable[[ImageBGR], list[Detection]]

_LK_WIN = (11, 11)
_LK_LEVELS = 3
_LK_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03)
_EXTRA_CORNERS = 10  # corner points per face besides the 5 landmarks
# A detection this far (x face spread: ~30 px for a 100 px face) from the smoothed landmarks is a
# jump (someone else framed alike: 0.4), not the detector's noise (2 px on a 100 px face: 0.08).
_JUMP = 0.25
_MIN_GOOD_POINTS = 5  # below this the similarity fit is not trusted
_MIN_INLIER_RATIO = 0.5  # share of a track's points that must survive the checks
_HEAD = 2.0  # a face box grown by this much covers the head around it (hair, ears, neck)
# A crowded track's flow may differ from its speed by this x its landmark spread (the spread is
# ~0.3 x the face box's width: 0.05 is ~1.5 % of the width, 1.35 px on a 90 px face).
_CROWDED_STEP = 0.05
_MATCH_IOU = 0.3  # a detection continues a track only with at least this overlap
# A frame where every track's flow failed is a scene cut when its flow image and the previous one
# are unrelated: normalised cross-correlation (brightness and contrast do not move it, so an
# exposure step or lights going on is no cut) below _CUT_NCC in place AND below _CUT_NCC_MOVED at
# the best shift (a knocked or panning camera moves the whole picture: in place that looks like a
# cut). Measured at 320 px (in place) and 80 px (shifted, +-20 %): cuts between shots -0.08 to 0.06
# in place, 0.21-0.37 at the best shift; a 60-250 px pan or jolt at 720p, smeared or not, 0.84-0.95
# at the best shift; a black box over the face 0.45 in place; +45 levels, x1.4, x0.5, sensor noise
# 0.99-1.0. A flat picture (a black frame, a lens cap) is no shot: below _CUT_MIN_STD grey levels
# of spread on either side nothing is a cut.
_CUT_NCC = 0.15
_CUT_NCC_MOVED = 0.6
_CUT_MIN_STD = 6.0
_CUT_SEARCH = 0.2  # the shifted match: the middle of the new picture searched over +-20 % of the old


@dataclass(slots=True)
class TrackedFace:
    """One face in one frame: a snapshot, safe to hand to another worker (never updated later).

    box: (4,) float32 x1, y1, x2, y2 around the smoothed landmarks.
    kps: (5, 2) float32 smoothed landmarks (what the aligner should use); raw_kps: unsmoothed.
    score: detector confidence of the track's last detection.
    quality: 0..1 confidence in this frame's landmarks (1 right after a detection, the flow's
        inlier share on tracked frames, 0 when the face was not found).
    detected: True when this frame's landmarks come from the detector.
    swap_weight: 0..1 blend of the swapped face (fades over `fade_frames`).
    embedding: identity embedding, filled in by the caller (TargetSelector) for identity lock.
    lost_frames: consecutive frames the detector has failed to confirm this track (0 = seen).
    reacquired: the detector found this track again in this frame after losing it or after its
        flow failed: across that break the id may have passed to someone else, so an identity
        check should look again.
    """

    track_id: int
    box: FloatArray
    kps: FloatArray
    raw_kps: FloatArray
    score: float
    quality: float
    detected: bool
    swap_weight: float
    embedding: npt.NDArray[np.float32] | None = None
    lost_frames: int = 0
    reacquired: bool = False

    @property
    def area(self) -> float:
        return _box_area(self.box)


@dataclass(slots=True)
class _FlowResult:
    ok: bool
    kps: FloatArray  # full-frame pixels
    quality: float
    corners: FloatArray  # surviving corners, small-image pixels, (N, 2)
    motion: Affine | None  # fitted similarity from the previous frame, full-frame pixels


@dataclass(slots=True)
class _Track:
    track_id: int
    raw_kps: FloatArray  # last measurement (detector or flow), full-frame pixels
    rel_box: npt.NDArray[np.float64]  # detector box in landmark units: (box - centre) / spread
    score: float
    filter: OneEuroFilter
    corners: FloatArray  # extra flow points, small-image pixels, (N, 2)
    velocity: npt.NDArray[np.float64]  # landmark centre motion, px/frame, for coasting when lost
    motion: Affine | None = None  # how the face moved since the last frame, when known
    quality: float = 1.0
    swap_weight: float = 0.0
    missed: int = 0
    detected: bool = True
    # False once the track has coasted (its flow failed or was not believed): flow that "works"
    # from a coasted position only proves the background there is still, not that a face is.
    # Only a detection brings a broken track back.
    flow_chain: bool = True
    reacquired: bool = False  # this frame's detection continued it across a break (TrackedFace)
    # Another face's head is over this one and moves another way: its edge may drag this face's
    # flow, so the speed is learned only from flow a detection confirms (see _mark_crowded).
    crowded: bool = False
    # Where a face hidden behind someone was last believed to be (a detection or flow that held)
    # when it began to coast: a re-find is looked for anywhere between there and the coasted
    # position. None when the track is not coasting, or did not coast from behind someone.
    seen_kps: FloatArray | None = None


def flow_geometry(height: int, width: int, max_side: int) -> tuple[float, tuple[int, int]]:
    """(scale, (rows, cols)) of the small grey image the flow runs on: longer side <= max_side."""
    scale = min(1.0, max_side / max(height, width))
    return scale, (max(1, round(height * scale)), max(1, round(width * scale)))


def write_flow_image(image: ImageBGR, out: GreyImage, scratch_bgr: ImageBGR | None = None) -> None:
    """`image` shrunk to `out`'s size and made grey, into `out`. `scratch_bgr`: an (rows, cols, 3)
    buffer for the shrunk colour picture (allocated when not given or of another size)."""
    h, w = out.shape
    if (h, w) == image.shape[:2]:
        cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=out)
        return
    if scratch_bgr is None or scratch_bgr.shape != (h, w, 3):
        scratch_bgr = np.empty((h, w, 3), dtype=np.uint8)
    # Shrink first, then convert; nearest-neighbour shrink (0.08 ms at 720p vs 0.25 linear, 1.8
    # area): LK's own pyramid smooths what it aliases, and on the astronaut clip at 720p the
    # landmark error was the same as with a linear shrink (1.17 vs 1.19 px).
    cv2.resize(image, (w, h), dst=scratch_bgr, interpolation=cv2.INTER_NEAREST)
    cv2.cvtColor(scratch_bgr, cv2.COLOR_BGR2GRAY, dst=out)


def flow_image(image: ImageBGR, max_side: int) -> GreyImage:
    """A new small grey copy of `image` for the flow (see FaceTracker.prepare). New per frame on
    purpose: it travels with its frame, which a reused buffer could not (a live camera's frames
    are dropped and replaced while the analysis still reads an older one)."""
    _, (h, w) = flow_geometry(int(image.shape[0]), int(image.shape[1]), max_side)
    out = np.empty((h, w), dtype=np.uint8)
    write_flow_image(image, out)
    return out


class FaceTracker:
    """Detect every `interval` frames, carry landmarks with optical flow in between.

    detect: the face detector (e.g. `MTCNN().detect`), called with the full BGR frame.
    settings: smoothing, fade and track-life parameters. `enabled=False` turns the tracker into a
        plain per-frame detector (no flow, no smoothing) that still assigns track ids and fades.
    interval: run the detector every this many frames (DetectorSettings.interval).
    score_threshold: detections scoring below it are tracked but faded to passthrough.
    flow_max_side: the flow runs on a grey copy whose longer side is at most this many pixels.

    Not thread-safe: one tracker per stream, called with frames in order.
    """

    def __init__(
        self,
        detect: DetectFn,
        settings: TrackerSettings,
        interval: int,
        *,
        score_threshold: float = 0.5,
        flow_max_side: int = 320,
        fb_threshold: float = 1.0,
        max_scale_step: float = 1.25,
    ) -> None:
        if interval < 1:
            raise ValueError(f"interval must be >= 1 frame, got {interval}")
        if flow_max_side < 64:
            raise ValueError(f"flow_max_side must be >= 64 pixels, got {flow_max_side}")
        self._detect = detect
        self.settings = settings
        self.interval = int(interval)
        self.score_threshold = float(score_threshold)
        self.flow_max_side = int(flow_max_side)
        self.fb_threshold = float(fb_threshold)  # forward-backward error limit, small-image px
        self.max_scale_step = float(max_scale_step)

        self._tracks: list[_Track] = []
        self._last_shape: tuple[int, ...] | None = None
        self._next_id = 1
        self._since_detection = 0
        # Grey buffers reused frame to frame: full-size grey, and two small ones that swap roles.
        self._frame_shape: tuple[int, ...] | None = None
        self._scale = 1.0
        self._small_bgr: ImageBGR = np.empty((0, 0, 3), dtype=np.uint8)
        self._small: list[GreyImage] = []
        self._cur = 0
        self._has_prev = False

        self.frames = 0  # update() calls
        self.detections_run = 0  # detector calls
        self.tracked_frames = 0  # frames whose faces came from flow alone (detector skipped)
        self.cuts = 0  # scene cuts seen (each started the tracks afresh)
        self.cut = False  # whether the last update() saw a scene cut
        self._search_left = 0  # frames after a cut that are searched even with no face in view

    @classmethod
    def from_settings(cls, detect: DetectFn, settings: Settings) -> FaceTracker:
        """A tracker wired to the engine settings: tracker section, detector interval and threshold."""
        return cls(
            detect, settings.tracker, settings.detector.interval, score_threshold=settings.detector.threshold
        )

    # ----------------------------------------------------------------------------- public API

    def reconfigure(self, settings: TrackerSettings, interval: int) -> None:
        """Apply a new settings snapshot (live change); tracks and ids are kept."""
        if interval < 1:
            raise ValueError(f"interval must be >= 1 frame, got {interval}")
        toggled = settings.enabled != self.settings.enabled
        self.settings = settings
        self.interval = int(interval)
        for track in self._tracks:
            track.filter.min_cutoff = settings.min_cutoff
            track.filter.beta = settings.beta
            track.filter.d_cutoff = settings.d_cutoff
            if toggled:
                # Filter state and flow image froze while tracking was off (or ran without them):
                # resuming from seconds-old positions slid the swap for several frames.
                track.filter.reset()
        if toggled:
            self._has_prev = False
            self._since_detection = self.interval  # detect on the next frame

    def _rescale(self, factor: float) -> None:
        for track in self._tracks:
            track.raw_kps = (track.raw_kps * factor).astype(np.float32)
            if track.seen_kps is not None:
                track.seen_kps = (track.seen_kps * factor).astype(np.float32)
            track.velocity = track.velocity * factor
            track.filter.scale(factor)
            track.motion = None
            track.corners = np.empty((0, 2), dtype=np.float32)  # reseeded at the detection
        self._has_prev = False
        self._since_detection = self.interval  # detect on the next frame

    def reset(self) -> None:
        """Forget every track and the previous frame (new source, seek); ids keep counting up."""
        self._tracks.clear()
        self._has_prev = False
        self._since_detection = 0

    def update(
        self, image_bgr: ImageBGR, timestamp: float, *, flow_grey: GreyImage | None = None
    ) -> list[TrackedFace]:
        """The faces in this frame. `timestamp` in seconds (capture time), increasing.
        `flow_grey`: this frame's `prepare(image_bgr)`, made ahead (else made here)."""
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or image_bgr.dtype != np.uint8:
            got = f"{image_bgr.shape} {image_bgr.dtype}"
            raise ValueError(f"expected an (H, W, 3) uint8 BGR frame, got {got}")
        if self._last_shape is not None and image_bgr.shape != self._last_shape and self._tracks:
            old_h, old_w = self._last_shape[:2]
            h, w = image_bgr.shape[:2]
            if abs(w * old_h - h * old_w) <= 0.01 * w * old_h:
                # The same picture at another size (pipeline.processing_size changed live): every
                # track is scaled with it and kept, so the swap neither blinks nor moves to someone
                # else. The next frame is a detection (nothing to flow from at the new size).
                self._rescale(w / old_w)
            else:
                # Another picture (a new aspect ratio): old landmarks mean nothing here. Ids keep
                # counting, so a locked target re-locks.
                self.reset()
        self._last_shape = image_bgr.shape
        self.frames += 1
        # Flow runs even at interval 1: its motion estimate lets the smoothing follow a moving face
        # without lag (see _snapshot).
        use_flow = self.settings.enabled
        flows: list[_FlowResult | None] = [None] * len(self._tracks)
        for track in self._tracks:
            track.reacquired = False
        self.cut = False
        self._search_left = max(self._search_left - 1, 0)
        if use_flow:
            self._prepare_grey(image_bgr, flow_grey)
            if self._has_prev and self._tracks:
                flows = self._flow_all(image_bgr.shape)
                if self._is_cut(flows):
                    self.cut = True
                    self.cuts += 1
                    self._tracks.clear()
                    flows = []
                    # A new shot's first frame may show no face yet (a dissolve, motion blur): look
                    # on every frame for a while, not only when the interval comes round.
                    self._search_left = self.interval + 1  # this frame and the interval's next
        self._mark_crowded(flows)

        if self.cut or not use_flow or not self._has_prev or self._needs_detection(flows):
            self._detect_and_associate(image_bgr, flows)
            self._since_detection = 0
        else:
            for track, flow in zip(self._tracks, flows, strict=True):
                assert flow is not None and flow.ok  # _needs_detection said so
                self._apply_flow(track, flow)
            self._since_detection += 1
            self.tracked_frames += 1

        if use_flow:
            self._cur ^= 1
            self._has_prev = True
        return [self._snapshot(track, timestamp) for track in self._tracks]

    # ----------------------------------------------------------------------------- detection

    def _is_cut(self, flows: list[_FlowResult | None]) -> bool:
        """Every track's flow failed and the picture is another shot (see _CUT_NCC)."""
        if not flows or any(f is None or f.ok for f in flows):
            return False
        cur, prev = self._small[self._cur], self._small[self._cur ^ 1]
        if min(float(cv2.meanStdDev(img)[1][0, 0]) for img in (cur, prev)) < _CUT_MIN_STD:
            return False
        if float(cv2.matchTemplate(cur, prev, cv2.TM_CCOEFF_NORMED)[0, 0]) >= _CUT_NCC:
            return False
        h, w = cur.shape
        tiny = (max(w // 4, 10), max(h // 4, 10))
        old = cv2.resize(prev, tiny, interpolation=cv2.INTER_AREA)
        new = cv2.resize(cur, tiny, interpolation=cv2.INTER_AREA)
        mx, my = max(1, int(tiny[0] * _CUT_SEARCH)), max(1, int(tiny[1] * _CUT_SEARCH))
        middle = new[my:-my, mx:-mx]
        return float(cv2.matchTemplate(old, middle, cv2.TM_CCOEFF_NORMED).max()) < _CUT_NCC_MOVED

    def _needs_detection(self, flows: list[_FlowResult | None]) -> bool:
        if self._since_detection + 1 >= self.interval:
            return True
        if not self._tracks:
            # An empty scene is searched on the interval's schedule only, but at every frame
            # just after a cut.
            return self._search_left > 0
        if any(t.missed > 0 for t in self._tracks):
            return True  # a lost face: look for it on every frame until it is found or dropped
        moved: list[FloatArray] = []
        for track, flow in zip(self._tracks, flows, strict=True):
            if flow is None or not flow.ok:
                return True  # failed flow check: a cut, an occluder, a fast move
            if track.crowded and not _flow_continues(track, flow):
                return True  # dragged by the head next to it, or moving: only a detection can tell
            moved.append(_box_from_kps(flow.kps, track.rel_box))
        # Two faces overlapping: the flow of the one behind slides onto the one in front, and only
        # the detector can tell which track owns which face, so ask it while they overlap.
        return len(moved) > 1 and _max_pair_iou(np.array(moved)) >= _MATCH_IOU

    def _detect_and_associate(self, image: ImageBGR, flows: list[_FlowResult | None]) -> None:
        self.detections_run += 1
        # A non-finite or empty detection (an fp16 overflow, a broken model) would poison the
        # track it matched (NaN landmarks, NaN box) or fail the frame: it is not a face.
        detections = [d for d in self._detect(image) if _usable_detection(d)]
        # Where each track should be now: its flow where that held, else coasting at its last speed.
        # A lost track's flow is only believed when it continues the track's own motion (see
        # _flow_continues): behind another face its points ride on the occluder.
        usable: list[_FlowResult | None] = []
        predicted: list[FloatArray] = []
        for track, flow in zip(self._tracks, flows, strict=True):
            ok = (
                flow is not None
                and flow.ok
                and track.flow_chain
                and (track.missed == 0 or _flow_continues(track, flow))
            )
            usable.append(flow if ok else None)
            kps = flow.kps if flow is not None and ok else _shifted(track.raw_kps, track.velocity)
            predicted.append(_box_from_kps(kps, track.rel_box))
        matches: dict[int, int] = {}
        if self._tracks and detections:
            iou = _iou_matrix(np.array(predicted), np.array([d.box for d in detections]))
            rows, cols = linear_sum_assignment(-iou)
            matches = {int(r): int(c) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= _MATCH_IOU}
        matches.update(self._match_along_paths(detections, usable, predicted, matches))

        claimed = np.array([detections[j].box for j in matches.values()], dtype=np.float32).reshape(-1, 4)
        survivors: list[_Track] = []
        for i, (track, flow) in enumerate(zip(self._tracks, usable, strict=True)):
            if i in matches:
                # Flow that ran and was not believed (failed, or the track coasted): the detection
                # continues the track across a break.
                broken = flows[i] is not None and flow is None
                self._apply_detection(track, detections[matches[i]], flow, broken=broken)
                survivors.append(track)
                continue
            track.missed += 1
            track.detected = False
            expired = track.missed > self.settings.max_missed
            if expired and (track.swap_weight <= 0.0 or self.settings.fade_frames == 0):
                continue  # gone: its id is never reused, so a locked target unlocks
            # (Expired with its swap still showing: it coasts on, fading out, and goes when the fade
            # is over -- dropped at once, a fade longer than max_missed popped off half way.)
            follows = not expired and flow is not None and _flow_continues(track, flow)
            if flow is not None and follows and not _overlaps(predicted[i], claimed):
                # The detector missed a face the flow still follows (a turned head, motion blur):
                # trust the flow for a few frames with a quality that drops with every miss.
                self._apply_flow(track, flow)
                track.quality *= 1.0 - track.missed / (self.settings.max_missed + 1.0)
            else:
                # Nothing to follow, or the flow slid onto a face another track owns (this one went
                # behind it; its points then report the occluder's motion with a clean
                # forward-backward check): coast at the last speed, so that a face crossing behind
                # another re-emerges where its track expects it.
                if track.flow_chain:
                    # Where the face was last believed to be, kept only for a face hidden behind
                    # someone: that is where one stops out of sight. (A face leaving at the frame's
                    # edge is not looked for along its way: someone else coming in there took its id.)
                    track.seen_kps = track.raw_kps.copy() if track.crowded else None
                track.flow_chain = False
                track.raw_kps = _shifted(track.raw_kps, track.velocity)
                track.corners = (track.corners + track.velocity * self._scale).astype(np.float32)
                track.motion = _translation(track.velocity)
                track.quality = 0.0
            survivors.append(track)

        matched_dets = set(matches.values())
        for j, det in enumerate(detections):
            if j not in matched_dets:
                track = self._new_track(det)
                if self.cut and det.score >= self.score_threshold:
                    track.swap_weight = 1.0  # found on a cut: swapped at once (see the module doc)
                survivors.append(track)
        self._tracks = survivors

    def _match_along_paths(
        self,
        detections: list[Detection],
        usable: list[_FlowResult | None],
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
            for i, track in enumerate(self._tracks)
            if i not in matches and usable[i] is None and track.missed > 0 and track.seen_kps is not None
        ]
        if not free_dets or not coasting:
            return {}
        det_boxes = np.array([detections[j].box for j in free_dets], dtype=np.float32)
        iou = np.zeros((len(coasting), len(free_dets)), dtype=np.float64)
        for r, i in enumerate(coasting):
            track = self._tracks[i]
            assert track.seen_kps is not None
            start, end = _box_from_kps(track.seen_kps, track.rel_box), predicted[i]
            for c in range(len(free_dets)):
                iou[r, c] = _iou_matrix(
                    _nearest_on_path(start, end, det_boxes[c])[None, :], det_boxes[c : c + 1]
                )[0, 0]
        rows, cols = linear_sum_assignment(-iou)
        return {
            coasting[int(r)]: free_dets[int(c)]
            for r, c in zip(rows, cols, strict=True)
            if iou[r, c] >= _MATCH_IOU
        }

    def _new_track(self, det: Detection) -> _Track:
        s = self.settings
        track = _Track(
            track_id=self._next_id,
            raw_kps=det.kps.astype(np.float32).copy(),
            rel_box=_relative_box(det),
            score=float(det.score),
            filter=OneEuroFilter(s.min_cutoff, s.beta, s.d_cutoff),
            corners=self._seed_corners(det.box),
            velocity=np.zeros(2, dtype=np.float64),
        )
        self._next_id += 1
        return track

    def _apply_detection(
        self, track: _Track, det: Detection, flow: _FlowResult | None, *, broken: bool = False
    ) -> None:
        kps = det.kps.astype(np.float32)
        track.motion = flow.motion if flow is not None and flow.ok else None
        track.reacquired = broken or track.missed > 0
        if track.missed > 0:
            # Re-acquired after a gap: smoothing across the gap would only add lag, and the fade
            # hides the jump while the weight climbs back.
            track.filter.reset()
            if not track.crowded:
                # (Crowded, the speed is not learned again until the heads part or a detection
                # confirms the flow: zeroed here, the face coasted in place the next time it hid.)
                track.velocity[:] = 0.0
        elif broken and _jumped(track.filter.value, kps):
            # Found where its flow failed, away from where the swap is (a cut to someone framed
            # alike, a fast move): smoothing across the break dragged the swap from the old
            # landmarks to the new ones over several frames. (Found where it was -- a hand passing
            # over the face fails the flow on every frame -- keeps the smoothing: resetting it
            # there only let the detector's noise through.) The speed is kept: a face about to
            # pass behind another coasts on it.
            track.filter.reset()
        elif flow is not None and flow.ok:
            # Speed from the flow, not from detector to detector: a partly hidden face's detection
            # is off by several pixels, which would send a coasting track the wrong way. A crowded
            # face's flow is believed when the detection lands where the flow put it (no head
            # dragged it): frozen instead, a face nodding next to someone kept straying from its
            # stale speed and ran the detector on most frames.
            confirmed = _centre_gap(flow.kps, kps) <= _crowded_bound(kps)
            self._note_motion(track, flow.kps, confirmed=confirmed)
        track.raw_kps = kps.copy()
        track.rel_box = _relative_box(det)
        track.seen_kps = None  # seen now: a later coasting starts its own way
        track.score = float(det.score)
        track.quality = 1.0
        track.missed = 0
        track.detected = True
        track.flow_chain = True
        track.corners = self._seed_corners(det.box)

    # ----------------------------------------------------------------------------- flow

    def prepare(self, image: ImageBGR) -> GreyImage | None:
        """The small grey copy `update` flows on, made ahead (the engine's capture thread makes it
        while the analysis works on the frame before; None with flow off). Reads only settings."""
        if not self.settings.enabled:
            return None
        return flow_image(image, self.flow_max_side)

    def _prepare_grey(self, image: ImageBGR, prepared: GreyImage | None) -> None:
        """Make the current small grey image: `prepared` when it fits, else converted from the frame
        into the current buffer (allocated once per frame size)."""
        if image.shape != self._frame_shape:
            h, w = image.shape[:2]
            self._scale, (sh, sw) = flow_geometry(h, w, self.flow_max_side)
            self._small_bgr = np.empty((sh, sw, 3), dtype=np.uint8)
            self._small = [np.empty((sh, sw), dtype=np.uint8), np.empty((sh, sw), dtype=np.uint8)]
            self._frame_shape = image.shape
            self._has_prev = False  # a new frame size: nothing to flow from
            self._cur = 0
        cur = self._small[self._cur]
        if prepared is not None and prepared.shape == cur.shape and prepared.dtype == np.uint8:
            self._small[self._cur] = prepared  # the frame's own copy: this tracker only reads it
        else:
            write_flow_image(image, cur, self._small_bgr)

    def _seed_corners(self, box: FloatArray) -> FloatArray:
        """Good-to-track corners in the inner part of the face box (the edges hold background,
        which does not move with the face)."""
        empty = np.empty((0, 2), dtype=np.float32)
        if not self._small or not self.settings.enabled:
            return empty
        grey = self._small[self._cur]
        s = self._scale
        x1, y1, x2, y2 = (float(v) * s for v in box)
        mx, my = 0.2 * (x2 - x1), 0.2 * (y2 - y1)
        h, w = grey.shape
        c0, c1 = max(0, int(x1 + mx)), min(w, int(math.ceil(x2 - mx)))
        r0, r1 = max(0, int(y1 + my)), min(h, int(math.ceil(y2 - my)))
        if c1 - c0 < 8 or r1 - r0 < 8:
            return empty
        side = min(c1 - c0, r1 - r0)
        found = cv2.goodFeaturesToTrack(
            grey[r0:r1, c0:c1], _EXTRA_CORNERS, qualityLevel=0.01, minDistance=max(2.0, side / 8.0)
        )
        if found is None:
            return empty
        pts = found.reshape(-1, 2).astype(np.float32)
        pts[:, 0] += c0
        pts[:, 1] += r0
        return pts

    def _flow_all(self, frame_shape: tuple[int, ...]) -> list[_FlowResult | None]:
        """One forward and one backward LK call for every track's points together."""
        prev, cur = self._small[self._cur ^ 1], self._small[self._cur]
        s = self._scale
        s32 = np.float32(s)
        groups = [np.concatenate((t.raw_kps * s32, t.corners), dtype=np.float32) for t in self._tracks]
        p0 = (groups[0] if len(groups) == 1 else np.concatenate(groups)).reshape(-1, 1, 2)
        p1, st1, _ = cv2.calcOpticalFlowPyrLK(
            prev, cur, p0, np.empty_like(p0), winSize=_LK_WIN, maxLevel=_LK_LEVELS, criteria=_LK_CRITERIA
        )
        # Backward from where the points landed, without the forward start as a hint, so that a
        # point that slid onto the wrong structure does not find its way back by construction.
        p0r, st0, _ = cv2.calcOpticalFlowPyrLK(
            cur, prev, p1, np.empty_like(p0), winSize=_LK_WIN, maxLevel=_LK_LEVELS, criteria=_LK_CRITERIA
        )
        # Found both ways, and back within fb_threshold of the start (squared; in Python scalars:
        # on ~15 points numpy's per-call cost was several times the maths).
        limit = self.fb_threshold * self.fb_threshold
        back = (p0 - p0r).reshape(-1).tolist()
        good = [
            f == 1 and r == 1 and dx * dx + dy * dy < limit
            for f, r, dx, dy in zip(
                st1.ravel().tolist(), st0.ravel().tolist(), back[0::2], back[1::2], strict=True
            )
        ]
        a = p0.reshape(-1, 2)
        b = np.asarray(p1, dtype=np.float32).reshape(-1, 2)
        results: list[_FlowResult | None] = []
        start = 0
        for track, group in zip(self._tracks, groups, strict=True):
            end = start + group.shape[0]
            results.append(self._check_flow(track, a[start:end], b[start:end], good[start:end], frame_shape))
            start = end
        return results

    def _check_flow(
        self,
        track: _Track,
        src: FloatArray,
        dst: FloatArray,
        good: list[bool],
        frame_shape: tuple[int, ...],
    ) -> _FlowResult:
        """`good`: per point, whether its flow passed the forward-backward check. (Index lists in
        Python: on ~15 points numpy's per-call cost was most of this function's time.)"""
        s = self._scale
        fail = _FlowResult(False, track.raw_kps, 0.0, track.corners, None)
        n = src.shape[0]
        kept = [i for i, ok in enumerate(good) if ok]
        if len(kept) < _MIN_GOOD_POINTS:
            return fail
        # A similarity (rotation, uniform scale, shift) over all surviving points, RANSAC so that
        # a few points on background or a moving hand cannot bend it.
        m, inl = cv2.estimateAffinePartial2D(
            src[kept], dst[kept], method=cv2.RANSAC, ransacReprojThreshold=self.fb_threshold * 1.5
        )
        if m is None or inl is None:
            return fail
        inliers = [False] * n
        for i, fits in zip(kept, inl.ravel().tolist(), strict=True):
            inliers[i] = fits == 1
        ratio = sum(inliers) / n
        (a, b, tx), (c, d, ty) = m.tolist()
        step_scale = math.sqrt(abs(a * d - b * c))
        if ratio < _MIN_INLIER_RATIO or not 1.0 / self.max_scale_step <= step_scale <= self.max_scale_step:
            return fail

        # Landmarks: each keeps its own flow where that passed the checks (it follows expressions
        # the rigid fit cannot), else the fitted motion moves it.
        # (Five points in Python scalars: numpy's per-call cost was most of this function's time.)
        moved = [
            (qx / s, qy / s) if ok else ((a * px + b * py + tx) / s, (c * px + d * py + ty) / s)
            for (px, py), (qx, qy), ok in zip(src[:5].tolist(), dst[:5].tolist(), inliers[:5], strict=True)
        ]
        kps = np.array(moved, dtype=np.float32)

        # Box consistency: the landmarks' spread must not jump against the previous box.
        prev_spread = _centre_spread(track.raw_kps)[2]
        cx, cy, new_spread = _centre_spread(kps)
        if prev_spread <= 0:
            return fail
        if not 1.0 / self.max_scale_step <= new_spread / prev_spread <= self.max_scale_step:
            return fail
        h, w = frame_shape[:2]
        if not (0.0 <= cx < w and 0.0 <= cy < h):
            return fail  # the face centre left the frame

        corners = dst[[i for i in range(5, n) if inliers[i]]]  # a new float32 array
        motion = m.astype(np.float64)
        motion[:, 2] /= s  # small-image shift -> full-frame shift; the linear part is scale-free
        return _FlowResult(True, kps, ratio, corners, motion)

    def _apply_flow(self, track: _Track, flow: _FlowResult) -> None:
        self._note_motion(track, flow.kps)
        track.motion = flow.motion
        track.raw_kps = flow.kps
        track.quality = flow.quality
        track.detected = False
        track.corners = flow.corners
        if track.corners.shape[0] < _EXTRA_CORNERS // 2:
            # Corners leave with turning and occlusion; top up from the current frame.
            track.corners = self._seed_corners(_box_from_kps(flow.kps, track.rel_box))

    # ----------------------------------------------------------------------------- output

    def _mark_crowded(self, flows: list[_FlowResult | None]) -> None:
        """Flag the tracks whose face box a seen face's head (its box grown by _HEAD) reaches into
        while that head moves differently from this face's flow or from the speed it had (or a flow
        failed): only then can that head's edge slide over the face's points. Heads that move
        together (a camera pan or shake over two people side by side) are not crowded once their
        speeds are learned, so they cost no extra detections."""
        for track in self._tracks:
            track.crowded = False
        if len(self._tracks) < 2:
            return
        faces = np.array([_box_from_kps(t.raw_kps, t.rel_box) for t in self._tracks])
        heads = np.array([_grown(box, _HEAD) for box in faces])
        touching = _iou_matrix(faces, heads) > 0.0
        np.fill_diagonal(touching, False)
        steps = [
            _centre(flow.kps) - _centre(track.raw_kps) if flow is not None and flow.ok else None
            for track, flow in zip(self._tracks, flows, strict=True)
        ]
        for i, j in zip(*np.nonzero(touching), strict=True):
            if self._tracks[j].missed > 0:
                continue  # a lost track is a guess, not a head anyone can see
            mine, theirs = steps[i], steps[j]
            track = self._tracks[i]
            apart = _crowded_bound(track.raw_kps)
            if (
                mine is None
                or theirs is None
                or float(np.linalg.norm(mine - theirs)) > apart
                # A flow dragged whole by the head in front moves with it: it is not moving
                # together unless the face was already moving that way.
                or float(np.linalg.norm(track.velocity - theirs)) > apart
            ):
                track.crowded = True

    @staticmethod
    def _note_motion(track: _Track, kps: FloatArray, *, confirmed: bool = False) -> None:
        if track.crowded and not confirmed:
            # A still face with a head sliding over it: the points at the edge in front move with
            # the occluder, and a speed learned from them sent the face, once hidden, coasting away
            # (it came back under a new id). The speed from before they met is the better guess.
            return
        step = _centre(kps) - _centre(track.raw_kps)
        track.velocity = 0.5 * track.velocity + 0.5 * step

    def _snapshot(self, track: _Track, timestamp: float) -> TrackedFace:
        s = self.settings
        if s.enabled:
            previous = track.filter.value
            if track.motion is not None and previous is not None:
                # Motion compensation: move the filter's last output with the face, so the One-Euro
                # filter smooths only the detector's noise and the flow's residue, not the motion.
                track.filter.rebase(previous @ track.motion[:, :2].T + track.motion[:, 2])
            kps = track.filter.filter(track.raw_kps, timestamp).astype(np.float32)
        else:
            kps = track.raw_kps.copy()
        # Past max_missed a track only fades out (with min_quality 0 its coasting quality of 0 still
        # passed, and a ghost swap stayed where the person had been, for good).
        trusted = track.quality >= s.min_quality and track.score >= self.score_threshold
        healthy = trusted and track.missed <= s.max_missed
        target = 1.0 if healthy else 0.0
        if s.fade_frames == 0:
            track.swap_weight = target
        elif target > track.swap_weight:
            track.swap_weight = min(target, track.swap_weight + 1.0 / s.fade_frames)
        else:
            track.swap_weight = max(target, track.swap_weight - 1.0 / s.fade_frames)
        return TrackedFace(
            track_id=track.track_id,
            box=_box_from_kps(kps, track.rel_box),
            kps=kps,
            raw_kps=track.raw_kps.copy(),
            score=track.score,
            quality=float(track.quality),
            detected=track.detected,
            swap_weight=float(track.swap_weight),
            lost_frames=track.missed,
            reacquired=track.reacquired,
        )


# ----------------------------------------------------------------------------- geometry helpers


def _usable_detection(det: Detection) -> bool:
    box = np.asarray(det.box, dtype=np.float64)
    finite = bool(np.all(np.isfinite(box)) and np.all(np.isfinite(det.kps)) and math.isfinite(det.score))
    return finite and box[2] - box[0] >= 1.0 and box[3] - box[1] >= 1.0


def _shifted(kps: FloatArray, step: npt.NDArray[np.float64]) -> FloatArray:
    return (kps + step).astype(np.float32)


def _flow_continues(track: _Track, flow: _FlowResult) -> bool:
    """Whether the flow's step agrees with the track's recent speed (for a face the detector missed:
    an occluder passing in front moves its own way)."""
    if not flow.ok:
        return False
    step = _centre(flow.kps) - _centre(track.raw_kps)
    # Next to another head the flow is doubted sooner: its edge drags the points by a few pixels a
    # frame (a fifth of the loose bound), a drift that adds up while hidden.
    loose = max(3.0, 0.25 * _spread(track.raw_kps))
    allowed = _crowded_bound(track.raw_kps) if track.crowded else loose
    return float(np.linalg.norm(step - track.velocity)) <= allowed


def _nearest_on_path(start: FloatArray, end: FloatArray, target: FloatArray) -> FloatArray:
    """The box sliding from `start` to `end` (same size as `end`) at the point where its centre is
    nearest `target`'s centre."""
    a, b = _box_middle(start), _box_middle(end)
    path = b - a
    length2 = float(path @ path)
    t = 1.0 if length2 <= 1e-9 else min(max(float((_box_middle(target) - a) @ path) / length2, 0.0), 1.0)
    shift = (t - 1.0) * path
    return (end.astype(np.float64) + np.concatenate([shift, shift])).astype(np.float32)


def _box_middle(box: FloatArray) -> npt.NDArray[np.float64]:
    return (box[:2].astype(np.float64) + box[2:].astype(np.float64)) / 2.0


def _overlaps(box: FloatArray, others: npt.NDArray[np.float32]) -> bool:
    """True when `box` overlaps any of `others` (faces a detection gave to other tracks)."""
    return others.shape[0] > 0 and float(_iou_matrix(box[None, :], others).max()) >= _MATCH_IOU


def _grown(box: FloatArray, factor: float) -> FloatArray:
    """`box` scaled by `factor` about its centre."""
    c = (box[:2] + box[2:]) / 2.0
    half = (box[2:] - box[:2]) * (factor / 2.0)
    return np.concatenate([c - half, c + half]).astype(np.float32)


def _crowded_bound(kps: FloatArray) -> float:
    """How far (px) a crowded face's flow may stray: _CROWDED_STEP x its landmark spread, >= 1 px."""
    return max(1.0, _CROWDED_STEP * _spread(kps))


def _centre_gap(a: FloatArray, b: FloatArray) -> float:
    return float(np.linalg.norm(_centre(a) - _centre(b)))


def _translation(step: npt.NDArray[np.float64]) -> Affine:
    return np.array([[1.0, 0.0, step[0]], [0.0, 1.0, step[1]]], dtype=np.float64)


def _centre_spread(kps: FloatArray) -> tuple[float, float, float]:
    """(x, y) of the mean landmark position and the landmarks' RMS distance from it, in float64.
    Python scalars: on five points numpy's per-call cost was ten times the maths, and these run
    several times per face per frame on the analysis thread (the pipeline's serial stage)."""
    pts = kps.tolist()
    n = len(pts)
    sx = sy = 0.0
    for x, y in pts:
        sx += x
        sy += y
    cx, cy = sx / n, sy / n
    ss = 0.0
    for x, y in pts:
        dx, dy = x - cx, y - cy
        ss += dx * dx + dy * dy
    return cx, cy, math.sqrt(ss / n)


def _centre(kps: FloatArray) -> npt.NDArray[np.float64]:
    """Mean landmark position, float64."""
    cx, cy, _ = _centre_spread(kps)
    return np.array((cx, cy))


def _jumped(smoothed: npt.NDArray[np.float64] | None, kps: FloatArray) -> bool:
    """Whether a detection lies away from the smoothed landmarks (by a tenth of the face's size)."""
    if smoothed is None:
        return False
    gap = float(np.linalg.norm(np.asarray(smoothed, dtype=np.float64) - kps, axis=1).mean())
    return gap > _JUMP * max(_spread(kps), 1.0)


def _spread(kps: FloatArray) -> float:
    """RMS distance of the landmarks from their centre: a rotation-free size of the face."""
    return _centre_spread(kps)[2]


def _relative_box(det: Detection) -> npt.NDArray[np.float64]:
    """The detector's box in landmark units, so it can be rebuilt around moved landmarks."""
    c = _centre(det.kps)
    sp = max(_spread(det.kps), 1e-3)
    return (det.box.astype(np.float64) - np.concatenate([c, c])) / sp


def _box_from_kps(kps: FloatArray, rel_box: npt.NDArray[np.float64]) -> FloatArray:
    cx, cy, spread = _centre_spread(kps)
    sp = max(spread, 1e-3)
    x0, y0, x1, y1 = rel_box.tolist()
    return np.array((cx + x0 * sp, cy + y0 * sp, cx + x1 * sp, cy + y1 * sp), dtype=np.float32)


def _box_area(box: FloatArray) -> float:
    return max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)


def _max_pair_iou(boxes: npt.NDArray[np.float32]) -> float:
    iou = _iou_matrix(boxes, boxes)
    np.fill_diagonal(iou, 0.0)
    return float(iou.max())


def _iou_matrix(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """IoU of every box in a (N, 4) with every box in b (M, 4)."""
    a64, b64 = a.astype(np.float64)[:, None, :], b.astype(np.float64)[None, :, :]
    iw = np.clip(np.minimum(a64[..., 2], b64[..., 2]) - np.maximum(a64[..., 0], b64[..., 0]), 0.0, None)
    ih = np.clip(np.minimum(a64[..., 3], b64[..., 3]) - np.maximum(a64[..., 1], b64[..., 1]), 0.0, None)
    inter = iw * ih
    area_a = (a64[..., 2] - a64[..., 0]).clip(0.0) * (a64[..., 3] - a64[..., 1]).clip(0.0)
    area_b = (b64[..., 2] - b64[..., 0]).clip(0.0) * (b64[..., 3] - b64[..., 1]).clip(0.0)
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
