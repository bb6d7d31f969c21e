"""Frame-skipping face tracker: full detection every K frames, optical flow in between.

Why: a face detector costs tens of ms per frame on a CPU and a few on a GPU (docs/PERFORMANCE.md,
"Figures behind the code"), while the five landmarks the swapper needs move only a few pixels between
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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.types import Detection, FloatArray, ImageBGR
from realtime.core.settings import Settings, TrackerSettings
from realtime.face.one_euro import OneEuroFilter
from realtime.face.tracking.association import flow_continues, mark_crowded, match_along_paths, match_by_iou
from realtime.face.tracking.cuts import is_scene_cut
from realtime.face.tracking.flow import (
    EXTRA_CORNERS,
    FlowChecks,
    flow_all,
    flow_geometry,
    flow_image,
    write_flow_image,
)
from realtime.face.tracking.flow import seed_corners as seed_flow_corners
from realtime.face.tracking.geometry import (
    MATCH_IOU,
    box_area,
    box_from_kps,
    centre,
    centre_gap,
    crowded_bound,
    jumped,
    max_pair_iou,
    overlaps,
    relative_box,
    shifted,
    translation,
    usable_detection,
)
from realtime.face.tracking.state import FlowResult, GreyImage, Track

DetectFn = Callable[[ImageBGR], list[Detection]]


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
        return box_area(self.box)


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
        self._checks = FlowChecks(self.fb_threshold, self.max_scale_step)

        self._tracks: list[Track] = []
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
        self._seek = False  # the next frame is searched whatever the schedule (see seek)

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
                # Filter state and flow image freeze while tracking is off (or runs without them):
                # resuming from seconds-old positions would slide the swap for several frames.
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

    def seek(self) -> None:
        """Run the detector on the next frame whatever the schedule: someone to swap is missing (a
        locked person behind someone or out of the picture), and on the schedule alone they were
        found up to interval - 1 frames after stepping back into view."""
        self._seek = True

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
        flows: list[FlowResult | None] = [None] * len(self._tracks)
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
        mark_crowded(self._tracks, flows)

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
        self._seek = False
        return [self._snapshot(track, timestamp) for track in self._tracks]

    # ----------------------------------------------------------------------------- detection

    def _is_cut(self, flows: list[FlowResult | None]) -> bool:
        """Every track's flow failed and the picture is another shot (tracking/cuts.py)."""
        if not flows or any(f is None or f.ok for f in flows):
            return False
        return is_scene_cut(self._small[self._cur], self._small[self._cur ^ 1])

    def _needs_detection(self, flows: list[FlowResult | None]) -> bool:
        if self._since_detection + 1 >= self.interval or self._seek:
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
            if track.crowded and not flow_continues(track, flow):
                return True  # dragged by the head next to it, or moving: only a detection can tell
            moved.append(box_from_kps(flow.kps, track.rel_box))
        # Two faces overlapping: the flow of the one behind slides onto the one in front, and only
        # the detector can tell which track owns which face, so ask it while they overlap.
        return len(moved) > 1 and max_pair_iou(np.array(moved)) >= MATCH_IOU

    def _detect_and_associate(self, image: ImageBGR, flows: list[FlowResult | None]) -> None:
        self.detections_run += 1
        # A non-finite or empty detection (an fp16 overflow, a broken model) would poison the
        # track it matched (NaN landmarks, NaN box) or fail the frame: it is not a face.
        detections = [d for d in self._detect(image) if usable_detection(d)]
        # Where each track should be now: its flow where that held, else coasting at its last speed.
        # A lost track's flow is only believed when it continues the track's own motion (see
        # flow_continues): behind another face its points ride on the occluder.
        usable: list[FlowResult | None] = []
        predicted: list[FloatArray] = []
        for track, flow in zip(self._tracks, flows, strict=True):
            ok = (
                flow is not None
                and flow.ok
                and track.flow_chain
                and (track.missed == 0 or flow_continues(track, flow))
            )
            usable.append(flow if ok else None)
            kps = flow.kps if flow is not None and ok else shifted(track.raw_kps, track.velocity)
            predicted.append(box_from_kps(kps, track.rel_box))
        matches = match_by_iou(predicted, detections)
        matches.update(match_along_paths(self._tracks, detections, usable, predicted, matches))

        claimed = np.array([detections[j].box for j in matches.values()], dtype=np.float32).reshape(-1, 4)
        survivors: list[Track] = []
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
            follows = not expired and flow is not None and flow_continues(track, flow)
            if flow is not None and follows and not overlaps(predicted[i], claimed):
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
                track.raw_kps = shifted(track.raw_kps, track.velocity)
                track.corners = (track.corners + track.velocity * self._scale).astype(np.float32)
                track.motion = translation(track.velocity)
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

    def _new_track(self, det: Detection) -> Track:
        s = self.settings
        track = Track(
            track_id=self._next_id,
            raw_kps=det.kps.astype(np.float32).copy(),
            rel_box=relative_box(det),
            score=float(det.score),
            filter=OneEuroFilter(s.min_cutoff, s.beta, s.d_cutoff),
            corners=self._seed_corners(det.box),
            velocity=np.zeros(2, dtype=np.float64),
        )
        self._next_id += 1
        return track

    def _apply_detection(
        self, track: Track, det: Detection, flow: FlowResult | None, *, broken: bool = False
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
                # confirms the flow: zeroed here, the face would coast in place the next time it hides.)
                track.velocity[:] = 0.0
        elif broken and jumped(track.filter.value, kps):
            # Found where its flow failed, away from where the swap is (a cut to someone framed
            # alike, a fast move): smoothing across the break would drag the swap from the old
            # landmarks to the new ones over several frames. (Found where it was -- a hand passing
            # over the face fails the flow on every frame -- keeps the smoothing: resetting it
            # there only lets the detector's noise through.) The speed is kept: a face about to
            # pass behind another coasts on it.
            track.filter.reset()
        elif flow is not None and flow.ok:
            # Speed from the flow, not from detector to detector: a partly hidden face's detection
            # is off by several pixels, which would send a coasting track the wrong way. A crowded
            # face's flow is believed when the detection lands where the flow put it (no head
            # dragged it): frozen instead, a face nodding next to someone kept straying from its
            # stale speed and ran the detector on most frames.
            confirmed = centre_gap(flow.kps, kps) <= crowded_bound(kps)
            self._note_motion(track, flow.kps, confirmed=confirmed)
        track.raw_kps = kps.copy()
        track.rel_box = relative_box(det)
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
        if not self._small or not self.settings.enabled:
            return np.empty((0, 2), dtype=np.float32)
        return seed_flow_corners(self._small[self._cur], box, self._scale)

    def _flow_all(self, frame_shape: tuple[int, ...]) -> list[FlowResult | None]:
        prev, cur = self._small[self._cur ^ 1], self._small[self._cur]
        return flow_all(prev, cur, self._tracks, self._scale, frame_shape, self._checks)

    def _apply_flow(self, track: Track, flow: FlowResult) -> None:
        self._note_motion(track, flow.kps)
        track.motion = flow.motion
        track.raw_kps = flow.kps
        track.quality = flow.quality
        track.detected = False
        track.corners = flow.corners
        if track.corners.shape[0] < EXTRA_CORNERS // 2:
            # Corners leave with turning and occlusion; top up from the current frame.
            track.corners = self._seed_corners(box_from_kps(flow.kps, track.rel_box))

    # ----------------------------------------------------------------------------- output

    @staticmethod
    def _note_motion(track: Track, kps: FloatArray, *, confirmed: bool = False) -> None:
        if track.crowded and not confirmed:
            # A still face with a head sliding over it: the points at the edge in front move with
            # the occluder, and a speed learned from them sends the face, once hidden, coasting away
            # (to come back under a new id). The speed from before they met is the better guess.
            return
        step = centre(kps) - centre(track.raw_kps)
        track.velocity = 0.5 * track.velocity + 0.5 * step

    def _snapshot(self, track: Track, timestamp: float) -> TrackedFace:
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
        # passes, and a ghost swap would stay where the person was, for good).
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
            box=box_from_kps(kps, track.rel_box),
            kps=kps,
            raw_kps=track.raw_kps.copy(),
            score=track.score,
            quality=float(track.quality),
            detected=track.detected,
            swap_weight=float(track.swap_weight),
            lost_frames=track.missed,
            reacquired=track.reacquired,
        )


__all__ = [
    "DetectFn",
    "FaceTracker",
    "TrackedFace",
]
