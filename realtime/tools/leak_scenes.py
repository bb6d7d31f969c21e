"""Clips made from real photos where a face that should be swapped goes out of view and comes back,
with the truth of every frame: who is where, how much of each face is in view, how far it is turned.

Heads are cut from insightface's group photo (t1.jpg, six people) as squares and moved over a flat
background, so the detector, the optical flow and the recogniser all see real faces. Each scene
names the people to swap ("reference": one person, identity 0; "mapped": one identity each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from models.types import Detection, ImageBGR
from realtime.face.views import frontal_share

F32 = npt.NDArray[np.float32]
SIZE = (900, 400)  # canvas width, height
PATCH = 160  # px, each head's square
MARGIN = 1.3  # the square's side over the face box's longer side
ROW = 100  # y of every head's square
BACKGROUND = (96, 96, 96)
MIN_VISIBLE = 0.6  # the scripted detector finds a face with this share of its box in view
MIN_FRONTAL = 0.45  # ... and turned no further than this (views.frontal_share)

# The six people of t1.jpg, left to right: face box and landmarks in photo pixels (measured once
# with models.wrappers.mtcnn.MTCNN(max_side=None), as tests/real_faces.py).
_GROUP = (
    (
        (53.1, 262.2, 170.5, 395.3),
        ((86.5, 331.8), (130.2, 307.8), (121.9, 340.0), (115.6, 373.4), (148.8, 351.7)),
    ),
    (
        (269.5, 150.0, 373.8, 266.7),
        ((294.2, 202.9), (325.5, 183.5), (314.2, 216.2), (315.2, 237.3), (343.5, 223.2)),
    ),
    (
        (464.7, 264.3, 571.0, 411.3),
        ((492.9, 320.3), (541.0, 331.4), (508.2, 367.0), (484.1, 371.0), (530.4, 382.0)),
    ),
    (
        (741.1, 341.9, 841.8, 475.0),
        ((760.7, 396.4), (803.8, 399.9), (773.8, 431.7), (762.6, 439.7), (808.1, 442.8)),
    ),
    (
        (908.2, 62.5, 1012.9, 199.8),
        ((918.8, 118.6), (953.7, 111.3), (925.8, 149.7), (933.0, 174.8), (961.2, 168.3)),
    ),
    (
        (1134.3, 275.5, 1226.1, 400.0),
        ((1149.6, 325.3), (1194.4, 321.5), (1164.9, 346.5), (1153.4, 368.7), (1198.1, 366.1)),
    ),
)


def group_photo() -> ImageBGR:
    from insightface.data import get_image  # local: insightface pulls in heavy imports

    image = get_image("t1")
    if image is None:  # get_image returns None (no error) when the file is missing
        raise FileNotFoundError("insightface's data/images/t1.jpg is missing: reinstall insightface")
    return np.ascontiguousarray(image, dtype=np.uint8)


def group_landmarks(person: int) -> F32:
    """The person's five landmarks in the group photo (what a reference photo gives)."""
    return np.array(_GROUP[person][1], dtype=np.float32)


@dataclass(frozen=True, slots=True)
class Head:
    pixels: ImageBGR  # (PATCH, PATCH, 3)
    box: F32  # face box in patch pixels
    kps: F32  # landmarks in patch pixels


def cut_head(photo: ImageBGR, person: int) -> Head:
    (x1, y1, x2, y2), kps = _GROUP[person]
    side = MARGIN * max(x2 - x1, y2 - y1)
    s = PATCH / side
    m = np.array([[s, 0.0, -((x1 + x2) / 2 - side / 2) * s], [0.0, s, -((y1 + y2) / 2 - side / 2) * s]])
    pixels = cv2.warpAffine(photo, m, (PATCH, PATCH), flags=cv2.INTER_LINEAR, borderValue=BACKGROUND)
    corners = np.array([[x1, y1], [x2, y2]], dtype=np.float64) @ m[:, :2].T + m[:, 2]
    points = np.array(kps, dtype=np.float64) @ m[:, :2].T + m[:, 2]
    return Head(
        np.asarray(pixels, np.uint8), corners.reshape(4).astype(np.float32), points.astype(np.float32)
    )


def turned_head(head: Head, turn: float) -> Head:
    """The head turned away by `turn` (0..1): the side right of the nose squeezed towards it, as a
    head turning to its right looks from the front."""
    if turn <= 0.0:
        return head
    nose = float(head.kps[2, 0])
    squeeze = 1.0 - 0.85 * turn
    xs = np.arange(PATCH, dtype=np.float32)
    src_x = np.where(xs <= nose, xs, nose + (xs - nose) / squeeze).astype(np.float32)
    map_x = np.tile(src_x, (PATCH, 1))
    map_y = np.tile(np.arange(PATCH, dtype=np.float32)[:, None], (1, PATCH))
    pixels = cv2.remap(head.pixels, map_x, map_y, cv2.INTER_LINEAR, borderValue=BACKGROUND)
    kps = head.kps.copy()
    right = kps[:, 0] > nose
    kps[right, 0] = nose + (kps[right, 0] - nose) * squeeze
    box = head.box.copy()
    box[2] = max(nose + (box[2] - nose) * squeeze, float(kps[:, 0].max()))
    return Head(np.asarray(pixels, np.uint8), box, kps)


@dataclass(frozen=True, slots=True)
class FaceTruth:
    """One person in one frame, in frame pixels."""

    person: int
    box: F32
    kps: F32
    visible: float  # share of the face box in the picture and not covered
    frontal: float  # views.frontal_share of the true landmarks

    def found_by_scripted_detector(self) -> bool:
        return self.visible >= MIN_VISIBLE and self.frontal >= MIN_FRONTAL


@dataclass(frozen=True, slots=True)
class Sprite:
    """What is drawn at one spot of a frame, in drawing order: a head, or a hand (box only)."""

    person: int  # -1: a hand
    x: int
    y: int
    turn: float = 0.0
    hand: tuple[int, int] = (0, 0)  # width, height of a hand


@dataclass(slots=True)
class Scene:
    name: str
    mode: Literal["reference", "mapped"]
    people: tuple[int, ...]  # swapped people; mapped: person people[k] gets identity k + 1
    frames: list[ImageBGR] = field(default_factory=list)
    truth: list[list[FaceTruth]] = field(default_factory=list)

    def identity_of(self, person: int) -> int | None:
        """The identity a person should be swapped with (None: left alone)."""
        if person not in self.people:
            return None
        return 0 if self.mode == "reference" else self.people.index(person) + 1


def _hand_pixels(w: int, h: int) -> ImageBGR:
    """A skin-toned, softly textured block (fingers as vertical bands)."""
    x = np.arange(w, dtype=np.float32)
    bands = 0.85 + 0.15 * np.cos(x * (2 * np.pi / max(w / 4.0, 1.0)))
    base = np.array([120, 160, 215], dtype=np.float32)  # BGR skin
    pixels = base[None, None, :] * bands[None, :, None] * np.ones((h, 1, 1), np.float32)
    return np.clip(pixels, 0, 255).astype(np.uint8)


def _hidden_area(box: F32, cover: tuple[float, float, float, float]) -> float:
    w = min(float(box[2]), cover[2]) - max(float(box[0]), cover[0])
    h = min(float(box[3]), cover[3]) - max(float(box[1]), cover[1])
    return max(w, 0.0) * max(h, 0.0)


def render(
    scene: Scene,
    heads: dict[int, Head],
    shots: Sequence[list[Sprite]],
    backgrounds: Sequence[tuple[int, int, int]] | None = None,
) -> Scene:
    """Draw each frame's sprites in order (later ones on top) and record the truth."""
    w, h = SIZE
    for i, sprites in enumerate(shots):
        frame = np.empty((h, w, 3), dtype=np.uint8)
        frame[:] = backgrounds[i] if backgrounds is not None else BACKGROUND
        placed: list[tuple[int, tuple[float, float, float, float], F32, F32]] = []
        for sprite in sprites:
            if sprite.person < 0:
                pixels = _hand_pixels(*sprite.hand)
                box_f32, kps_f32 = np.zeros(4, np.float32), np.zeros((5, 2), np.float32)
            else:
                head = turned_head(heads[sprite.person], sprite.turn)
                pixels = head.pixels
                offset = np.array([sprite.x, sprite.y], dtype=np.float32)
                box_f32, kps_f32 = head.box + np.tile(offset, 2), head.kps + offset
            ph, pw = pixels.shape[:2]
            x1, y1 = max(sprite.x, 0), max(sprite.y, 0)
            x2, y2 = min(sprite.x + pw, w), min(sprite.y + ph, h)
            if x2 > x1 and y2 > y1:
                frame[y1:y2, x1:x2] = pixels[y1 - sprite.y : y2 - sprite.y, x1 - sprite.x : x2 - sprite.x]
            square = (float(sprite.x), float(sprite.y), float(sprite.x + pw), float(sprite.y + ph))
            placed.append((sprite.person, square, box_f32, kps_f32))
        truth: list[FaceTruth] = []
        for k, (person, _, box, kps) in enumerate(placed):
            if person < 0:
                continue
            area = float((box[2] - box[0]) * (box[3] - box[1]))
            inside = _hidden_area(box, (0.0, 0.0, float(w), float(h)))
            hidden = area - inside + sum(_hidden_area(box, sq) for _, sq, _, _ in placed[k + 1 :])
            visible = float(np.clip(1.0 - hidden / area, 0.0, 1.0))
            truth.append(FaceTruth(person, box, kps, visible, frontal_share(kps)))
        scene.frames.append(frame)
        scene.truth.append(truth)
    return scene


class ScriptedDetector:
    """Reports exactly the faces the truth says a detector finds (set `frame` before each call)."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.frame = 0

    def detect(self, image: ImageBGR, max_faces: int = 0) -> list[Detection]:
        found = [t for t in self.scene.truth[self.frame] if t.found_by_scripted_detector()]
        return [Detection(t.box.copy(), t.kps.copy(), 0.99) for t in found]


# ----------------------------------------------------------------------------- the scenes

TARGET, BYSTANDER = 2, 5  # group photo people
LOOK_ALIKE_TARGET, LOOK_ALIKE = 3, 4  # the two closest people of the photo (dlib 0.095)


def behind_someone(
    heads: dict[int, Head], target: int = TARGET, other: int = BYSTANDER
) -> list[list[Sprite]]:
    """The target sits still; someone walks past in front (8 px/frame), hiding them wholly."""
    start, still = 370 + PATCH + 10, 370
    n = (2 * (PATCH + 10)) // 8 + 1
    shots = [[Sprite(target, still, ROW), Sprite(other, start - 8 * i, ROW)] for i in range(n)]
    return shots + [shots[-1]] * 25


def behind_a_hand(heads: dict[int, Head]) -> list[list[Sprite]]:
    """A hand comes down over the target's face, stays a while, and goes back up."""
    ys = list(range(-150, ROW + 20, 20)) + [ROW + 20] * 12 + list(range(ROW + 20, -160, -20))
    shots = [
        [Sprite(BYSTANDER, 60, ROW), Sprite(TARGET, 400, ROW), Sprite(-1, 415, y, hand=(130, 150))]
        for y in ys
    ]
    return shots + [shots[-1]] * 20


def leaves_and_comes_back(heads: dict[int, Head]) -> list[list[Sprite]]:
    """The target walks out at the right edge (10 px/frame), stays out, and walks back in."""
    out = list(range(560, SIZE[0] + 10, 10))
    xs = out + [SIZE[0] + 10] * 10 + out[::-1] + [560] * 20
    return [[Sprite(BYSTANDER, 60, ROW), Sprite(TARGET, x, ROW)] for x in xs]


def after_a_cut(heads: dict[int, Head]) -> tuple[list[list[Sprite]], list[tuple[int, int, int]]]:
    """Two people, then a cut to another shot with them elsewhere on another background."""
    a = [[Sprite(BYSTANDER, 100, ROW), Sprite(TARGET, 420, ROW)]] * 20
    b = [[Sprite(TARGET, 150, ROW + 40), Sprite(BYSTANDER, 600, ROW - 40)]] * 30
    return a + b, [BACKGROUND] * 20 + [(40, 70, 110)] * 30


def crossing(heads: dict[int, Head], behind: int, in_front: int) -> list[list[Sprite]]:
    """`behind` walks right (3 px/frame) and passes behind `in_front`, walking left (5 px/frame)."""
    start = 300 + PATCH + 10
    n = (2 * (PATCH + 10)) // 8 + 12
    shots = [[Sprite(behind, 300 + 3 * i, ROW), Sprite(in_front, start - 5 * i, ROW)] for i in range(n)]
    return shots + [shots[-1]] * 15


def head_turn(heads: dict[int, Head]) -> list[list[Sprite]]:
    """The target turns away (the detector loses them), holds it, and turns back."""
    turns = (
        [0.0] * 6 + [k / 8 for k in range(1, 9)] + [1.0] * 10 + [k / 8 for k in range(7, -1, -1)] + [0.0] * 20
    )
    return [[Sprite(BYSTANDER, 60, ROW), Sprite(TARGET, 420, ROW, turn=t)] for t in turns]


def enters_at_the_edge(heads: dict[int, Head]) -> list[list[Sprite]]:
    """The target walks in from the right edge (8 px/frame) and stops."""
    xs = list(range(SIZE[0] + 10, 600, -8))
    return [[Sprite(BYSTANDER, 60, ROW), Sprite(TARGET, x, ROW)] for x in xs + [xs[-1]] * 20]


SceneBuilder = Callable[[dict[int, Head]], Scene]


def build_scenes(names: Sequence[str] | None = None) -> list[Scene]:
    """Every scene (or the named ones), rendered."""
    photo = group_photo()
    heads = {p: cut_head(photo, p) for p in range(len(_GROUP))}
    cut_shots, cut_backgrounds = after_a_cut(heads)
    recipes: dict[str, tuple[Scene, list[list[Sprite]], list[tuple[int, int, int]] | None]] = {
        "behind someone": (Scene("behind someone", "reference", (TARGET,)), behind_someone(heads), None),
        "behind a hand": (Scene("behind a hand", "reference", (TARGET,)), behind_a_hand(heads), None),
        "leaves and comes back": (
            Scene("leaves and comes back", "reference", (TARGET,)),
            leaves_and_comes_back(heads),
            None,
        ),
        "after a cut": (Scene("after a cut", "reference", (TARGET,)), cut_shots, cut_backgrounds),
        "two mapped crossing": (
            Scene("two mapped crossing", "mapped", (TARGET, BYSTANDER)),
            crossing(heads, TARGET, BYSTANDER),
            None,
        ),
        "head turn": (Scene("head turn", "reference", (TARGET,)), head_turn(heads), None),
        "enters at the edge": (
            Scene("enters at the edge", "reference", (TARGET,)),
            enters_at_the_edge(heads),
            None,
        ),
        "look-alikes": (
            Scene("look-alikes", "reference", (LOOK_ALIKE_TARGET,)),
            behind_someone(heads, LOOK_ALIKE_TARGET, LOOK_ALIKE),
            None,
        ),
    }
    wanted = list(recipes) if names is None else list(names)
    unknown = [n for n in wanted if n not in recipes]
    if unknown:
        raise ValueError(f"unknown scene(s) {unknown}; known: {list(recipes)}")
    return [render(recipes[n][0], heads, recipes[n][1], recipes[n][2]) for n in wanted]


SCENE_NAMES = (
    "behind someone",
    "behind a hand",
    "leaves and comes back",
    "after a cut",
    "two mapped crossing",
    "head turn",
    "enters at the edge",
    "look-alikes",
)

__all__ = [
    "SCENE_NAMES",
    "FaceTruth",
    "Scene",
    "ScriptedDetector",
    "build_scenes",
    "group_landmarks",
    "group_photo",
]
