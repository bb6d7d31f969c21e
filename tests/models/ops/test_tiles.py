"""models.ops.tiles: overlapping tiles over a picture of any size cover every pixel exactly once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ops.tiles import pad_for_tiles, tile_grid


@settings(deadline=None)
@given(
    width=st.integers(1, 700),
    height=st.integers(1, 500),
    tile=st.integers(8, 300),
    margin=st.integers(0, 40),
)
def test_every_pixel_is_in_exactly_one_tiles_core(width: int, height: int, tile: int, margin: int) -> None:
    if tile - 2 * margin < 1:
        with pytest.raises(ValueError, match="no core"):
            tile_grid(width, height, tile, margin)
        return
    grid = tile_grid(width, height, tile, margin)
    covered = np.zeros((height, width), dtype=np.int32)
    pw, ph = grid.padded_size
    for t in grid.tiles:
        c = t.core
        assert not c.empty
        covered[c.y0 : c.y1, c.x0 : c.x1] += 1
        # The tile reads inside the padded picture, and its core sits `margin` px inside it.
        assert t.x >= 0 and t.x + tile <= pw and t.y >= 0 and t.y + tile <= ph
        assert (c.x0, c.y0) == (t.x, t.y)  # picture px x is padded px x + margin
    assert (covered == 1).all()


@given(width=st.integers(1, 90), height=st.integers(1, 90), margin=st.integers(0, 12))
def test_the_padded_picture_holds_the_picture_and_repeats_its_edge(
    width: int, height: int, margin: int
) -> None:
    rng = np.random.default_rng(width * 1000 + height)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    grid = tile_grid(width, height, 2 * margin + 16, margin)
    padded = pad_for_tiles(image, grid)
    pw, ph = grid.padded_size
    assert padded.shape == (ph, pw, 3)
    m = margin
    assert np.array_equal(padded[m : m + height, m : m + width], image)
    assert np.array_equal(padded[:m, m : m + width], np.broadcast_to(image[:1], (m, width, 3)))
    assert np.array_equal(
        padded[m + height :, m + width - 1], np.broadcast_to(image[-1, -1], (ph - m - height, 3))
    )
    # A buffer of the right shape is reused.
    again = pad_for_tiles(image, grid, padded)
    assert again is padded or np.shares_memory(again, padded)


def test_a_grid_is_for_its_own_size() -> None:
    grid = tile_grid(100, 50, 64, 8)
    with pytest.raises(ValueError, match="100x50"):
        pad_for_tiles(np.zeros((51, 100, 3), np.uint8), grid)
    with pytest.raises(ValueError, match="no picture"):
        tile_grid(0, 10, 64, 8)
