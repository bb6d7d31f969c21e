"""`bench --watermark`'s robustness and specificity tables on a small scale: every edit's row is
printed with what was found, and unmarked material is not said to be marked."""

from __future__ import annotations

import io

from realtime.tools.bench_watermark import EDITS, measure_false_positives, measure_robustness, real_photos


def test_each_edit_gets_a_row_and_one_clip_of_a_real_photo_survives_them_all() -> None:
    out = io.StringIO()
    rows = measure_robustness(real_photos()[:1], 1, [(1280, 720)], out)
    assert [row.edit for row in rows] == list(EDITS)
    assert all(row.found == 1 and row.payload_read == 1 for row in rows), out.getvalue()
    assert all(row.z_lowest == row.z_median and row.z_lowest >= 7.5 for row in rows)
    text = out.getvalue()
    assert text.count("found   1/1 (0 in place)") == len(EDITS) and "lowest" in text


def test_unmarked_clips_and_noise_are_not_said_to_be_marked() -> None:
    out = io.StringIO()
    positives, payloads, highest = measure_false_positives(real_photos(), 8, out)
    assert positives == 0 and payloads == 0 and 0.0 < highest < 7.5
    assert "8 decisions" in out.getvalue() and "where an uncropped copy carries it" in out.getvalue()
