"""Greedy non-maximum suppression shared by the detectors (SCRFD, MTCNN).

Boxes are x1, y1, x2, y2 with insightface's and MTCNN's inclusive-pixel sizes (x2 - x1 + 1); a box
is kept when its overlap with every better box is <= the threshold.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import cv2
import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def nms(
    boxes: npt.NDArray[Any],
    scores: npt.NDArray[Any],
    threshold: float,
    mode: Literal["union", "min"] = "union",
) -> I64:
    """Greedy non-maximum suppression; returns kept indices, best score first.

    Overlap uses MTCNN's inclusive-pixel sizes (x2 - x1 + 1). 'min' divides the intersection by the
    smaller area, which also removes a small box nested inside a larger one.

    'union' runs in OpenCV's C++ NMSBoxes (stage 1 feeds it thousands of boxes, where a Python loop
    costs tens of ms): passing width/height as (x2 - x1 + 1) makes its IoU the inclusive one, and it
    keeps a box when IoU <= threshold, as `nms_reference` does.
    """
    if boxes.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    if mode == "min":
        return nms_reference(boxes, scores, threshold, mode)
    boxes = np.asarray(boxes, dtype=np.float64)
    rects = np.column_stack(
        [boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0] + 1.0, boxes[:, 3] - boxes[:, 1] + 1.0]
    )
    # NMSBoxes drops scores <= its score_threshold (which must be >= 0) and ranks in float32, where
    # close scores can tie; handing it ranks (n .. 1) from our own stable float64 sort keeps every box
    # and makes the order identical to nms_reference's.
    ranks = np.empty(boxes.shape[0], dtype=np.float32)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(boxes.shape[0], 0, -1, dtype=np.float32)
    # float64 rects select the Rect2d overload (no rounding); the stubs only know Sequence types.
    kept = cv2.dnn.NMSBoxes(cast(Any, rects), cast(Any, ranks), 0.0, float(threshold))
    return np.asarray(kept, dtype=np.int64).reshape(-1)


def nms_reference(
    boxes: npt.NDArray[Any],
    scores: npt.NDArray[Any],
    threshold: float,
    mode: Literal["union", "min"] = "union",
) -> I64:
    """NumPy greedy NMS with the same contract as `nms`: the 'min' path, and the oracle in tests.

    Each iteration is vectorised over all remaining boxes, so the loop runs once per *kept* box.
    """
    if boxes.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    area = (x2 - x1 + 1.0) * (y2 - y1 + 1.0)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size > 0:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        iw = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1.0)
        ih = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1.0)
        inter = iw * ih
        if mode == "min":
            overlap = inter / np.minimum(area[i], area[rest])
        else:
            overlap = inter / (area[i] + area[rest] - inter)
        order = rest[overlap <= threshold]
    return np.asarray(keep, dtype=np.int64)
