"""One-Euro filter: equal to the published algorithm, steadier when still, bounded lag when moving."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime.face.one_euro import OneEuroFilter

FPS = 30.0


class ReferenceOneEuro:
    """Scalar One-Euro filter written straight from Casiez et al. (CHI 2012), Algorithm 1."""

    def __init__(self, min_cutoff: float, beta: float, d_cutoff: float) -> None:
        self.min_cutoff, self.beta, self.d_cutoff = min_cutoff, beta, d_cutoff
        self.x_prev: float | None = None
        self.dx_prev = 0.0
        self.t_prev = 0.0

    @staticmethod
    def alpha(rate: float, cutoff: float) -> float:
        tau = 1.0 / (2.0 * math.pi * cutoff)
        te = 1.0 / rate
        return 1.0 / (1.0 + tau / te)

    def __call__(self, x: float, t: float) -> float:
        if self.x_prev is None:
            self.x_prev, self.t_prev = x, t
            return x
        rate = 1.0 / (t - self.t_prev)
        dx = (x - self.x_prev) * rate
        a_d = self.alpha(rate, self.d_cutoff)
        edx = a_d * dx + (1.0 - a_d) * self.dx_prev
        cutoff = self.min_cutoff + self.beta * abs(edx)
        a = self.alpha(rate, cutoff)
        out = a * x + (1.0 - a) * self.x_prev
        self.x_prev, self.dx_prev, self.t_prev = out, edx, t
        return out


def _noisy_times(n: int, rng: np.random.Generator) -> np.ndarray:
    """Camera-like timestamps: 30 fps with +-30 % jitter between frames."""
    return np.cumsum(rng.uniform(0.7, 1.3, n) / FPS)


@pytest.mark.parametrize(
    ("min_cutoff", "beta", "d_cutoff"), [(1.0, 0.0, 1.0), (1.0, 0.05, 1.0), (0.3, 0.5, 2.0)]
)
def test_matches_the_reference_algorithm_on_a_scalar_signal(
    min_cutoff: float, beta: float, d_cutoff: float
) -> None:
    rng = np.random.default_rng(1)
    times = _noisy_times(200, rng)
    signal = 50.0 * np.sin(2.0 * np.pi * 0.5 * times) + rng.normal(0.0, 2.0, times.size)
    ref = ReferenceOneEuro(min_cutoff, beta, d_cutoff)
    ours = OneEuroFilter(min_cutoff, beta, d_cutoff)
    expected = [ref(float(x), float(t)) for x, t in zip(signal, times, strict=True)]
    got = [float(ours.filter(x, t)) for x, t in zip(signal, times, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


def test_vectorised_equals_one_reference_filter_per_element() -> None:
    rng = np.random.default_rng(2)
    times = _noisy_times(60, rng)
    samples = rng.normal(100.0, 5.0, (times.size, 5, 2)).cumsum(axis=0)  # a wandering landmark set
    ours = OneEuroFilter(1.0, 0.05, 1.0)
    refs = [ReferenceOneEuro(1.0, 0.05, 1.0) for _ in range(10)]
    for x, t in zip(samples, times, strict=True):
        out = ours.filter(x, t)
        assert out.shape == (5, 2)
        expected = [r(float(v), float(t)) for r, v in zip(refs, x.ravel(), strict=True)]
        np.testing.assert_allclose(out.ravel(), expected, rtol=0, atol=1e-9)


def test_first_sample_and_first_after_reset_pass_through() -> None:
    f = OneEuroFilter(1.0, 0.0, 1.0)
    first = np.array([[10.0, 20.0]])
    np.testing.assert_array_equal(f.filter(first, 0.0), first)
    moved = f.filter(first + 100.0, 1.0 / FPS)
    assert np.all(moved < first + 100.0)  # smoothed, not passed through
    f.reset()
    np.testing.assert_array_equal(f.filter(first - 7.0, 2.0 / FPS), first - 7.0)


def test_output_is_a_copy_not_the_filter_state() -> None:
    f = OneEuroFilter()
    out = f.filter(np.zeros(3), 0.0)
    out += 1000.0
    np.testing.assert_array_equal(f.filter(np.zeros(3), 1.0 / FPS), np.zeros(3))


def test_repeated_timestamp_returns_the_previous_output_instead_of_dividing_by_zero() -> None:
    f = OneEuroFilter(1.0, 0.1, 1.0)
    f.filter(np.array([0.0]), 0.0)
    a = f.filter(np.array([10.0]), 0.1)
    b = f.filter(np.array([50.0]), 0.1)  # same timestamp: a duplicated camera frame
    np.testing.assert_array_equal(a, b)
    assert np.all(np.isfinite(f.filter(np.array([10.0]), 0.2)))


def test_shape_change_is_an_error() -> None:
    f = OneEuroFilter()
    f.filter(np.zeros((5, 2)), 0.0)
    with pytest.raises(ValueError, match="shape"):
        f.filter(np.zeros((4, 2)), 0.1)


def test_rebase_moves_the_state_so_rigid_motion_is_followed_without_lag() -> None:
    """Motion compensation: moving the state with the known motion leaves nothing to smooth."""
    f = OneEuroFilter(0.5, 0.0, 1.0)
    x = np.array([[0.0, 0.0], [10.0, 0.0]])
    f.filter(x, 0.0)
    for i in range(1, 10):
        x = x + 20.0  # 20 px per frame: a plain low-pass at 0.5 Hz would lag far behind
        previous = f.value
        assert previous is not None
        f.rebase(previous + 20.0)
        np.testing.assert_allclose(f.filter(x, i / FPS), x, atol=1e-9)


def test_noisy_still_signal_is_much_steadier() -> None:
    rng = np.random.default_rng(3)
    n = 300
    noisy = 200.0 + rng.normal(0.0, 1.5, (n, 5, 2))  # 1.5 px landmark noise on a still face
    f = OneEuroFilter(1.0, 0.05, 1.0)
    out = np.array([f.filter(x, i / FPS) for i, x in enumerate(noisy)])
    settled = slice(30, None)
    var_in = float(np.var(noisy[settled], axis=0).mean())
    var_out = float(np.var(out[settled], axis=0).mean())
    assert var_out < 0.25 * var_in, (var_in, var_out)  # measured: 0.17
    # ... and it is still centred on the truth, not frozen somewhere else.
    assert abs(float(out[settled].mean()) - 200.0) < 0.3


def _steady_ramp_lag(beta: float, speed: float) -> float:
    f = OneEuroFilter(1.0, beta, 1.0)
    lag = 0.0
    for i in range(120):
        x = speed * i / FPS
        lag = x - float(f.filter(np.array([x]), i / FPS)[0])
    return lag


def test_ramp_is_followed_with_bounded_lag_when_beta_is_positive() -> None:
    speed = 300.0  # px/s: a head turning quickly across a 640 px frame
    lag_beta = _steady_ramp_lag(0.05, speed)
    lag_plain = _steady_ramp_lag(0.0, speed)
    # The plain low-pass lags speed / (2 pi fc) (~48 px at 1 Hz); beta raises the cutoff with speed.
    assert lag_plain > 40.0
    assert 0.0 < lag_beta < 20.0
    # Faster motion -> higher cutoff: the lag grows much slower than the speed.
    assert _steady_ramp_lag(0.05, 2 * speed) < 1.5 * lag_beta


def test_step_is_reached_within_a_few_frames_when_beta_is_positive() -> None:
    def frames_to_settle(beta: float) -> int:
        f = OneEuroFilter(1.0, beta, 1.0)
        f.filter(np.array([0.0]), 0.0)
        for i in range(1, 300):
            if abs(100.0 - float(f.filter(np.array([100.0]), i / FPS)[0])) < 5.0:
                return i
        return 300

    fast, plain = frames_to_settle(0.05), frames_to_settle(0.0)
    assert fast <= 12, fast
    assert plain > 2 * fast, (plain, fast)


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        OneEuroFilter(min_cutoff=0.0)
    with pytest.raises(ValueError):
        OneEuroFilter(beta=-1.0)
    with pytest.raises(ValueError):
        OneEuroFilter(d_cutoff=0.0)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    values=st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=1, max_size=60),
    steps=st.lists(st.floats(1e-3, 0.5), min_size=60, max_size=60),
    min_cutoff=st.floats(0.01, 20.0),
    beta=st.floats(0.0, 5.0),
    d_cutoff=st.floats(0.01, 20.0),
)
def test_output_stays_within_the_input_range(
    values: list[float], steps: list[float], min_cutoff: float, beta: float, d_cutoff: float
) -> None:
    """Each output is a convex mix of the new sample and the last output: it can never overshoot."""
    f = OneEuroFilter(min_cutoff, beta, d_cutoff)
    t = 0.0
    lo, hi = math.inf, -math.inf
    for v, dt in zip(values, steps, strict=False):
        lo, hi = min(lo, v), max(hi, v)
        out = float(f.filter(np.array([v]), t)[0])
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        assert lo - tol <= out <= hi + tol
        t += dt
