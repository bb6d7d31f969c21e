"""One-Euro filter (Casiez, Roussel & Vogel, CHI 2012) over numpy arrays of any shape.

A low-pass filter whose cutoff rises with the signal's speed: a still face is smoothed hard (no
jitter), a moving one is followed with little lag. Every element of the array is filtered
independently (its own speed, its own cutoff), vectorised, with the state updated in place.

    alpha(fc, dt) = 1 / (1 + tau / dt),  tau = 1 / (2 pi fc)
    dx_hat = lowpass(alpha(d_cutoff), (x - x_hat_prev) / dt)
    fc = min_cutoff + beta * |dx_hat|
    x_hat = lowpass(alpha(fc), x)
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


class OneEuroFilter:
    """Stateful One-Euro filter; call `filter(x, t)` once per sample with t in seconds.

    The first sample (and the first after `reset()`) passes through unchanged. A sample whose
    timestamp does not advance (a duplicated camera timestamp) returns the previous output: that is
    the filter's limit as dt -> 0, and dividing by dt = 0 would poison the state with inf.

    min_cutoff: Hz; lower = steadier when still.  beta: 1/px; higher = less lag when moving.
    d_cutoff: Hz; cutoff of the speed estimate itself.
    """

    def __init__(self, min_cutoff: float = 1.0, beta: float = 0.0, d_cutoff: float = 1.0) -> None:
        if min_cutoff <= 0 or d_cutoff <= 0:
            raise ValueError(f"cutoffs must be > 0 Hz, got min_cutoff={min_cutoff}, d_cutoff={d_cutoff}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        self.min_cutoff = float(min_cutoff)
        self.beta = float(beta)
        self.d_cutoff = float(d_cutoff)
        self._x: F64 | None = None  # last output
        self._dx: F64 | None = None  # last smoothed speed
        self._scratch: F64 | None = None  # per-sample temporary, reused
        self._t = 0.0

    @property
    def initialised(self) -> bool:
        return self._x is not None

    @property
    def value(self) -> F64 | None:
        """The last output (a copy), or None before the first sample."""
        return None if self._x is None else self._x.copy()

    def rebase(self, x: npt.ArrayLike) -> None:
        """Replace the last output, keeping the time and speed estimate.

        For motion compensation: when the caller knows how the whole signal moved since the last
        sample (the face's optical-flow motion), moving the filter's state along with it leaves the
        filter to smooth only what that motion does not explain (detector noise), so a face that
        moves is followed without the low-pass lag.
        """
        if self._x is None:
            raise ValueError("rebase() before the first sample: nothing to move")
        new = np.asarray(x, dtype=np.float64)
        if new.shape != self._x.shape:
            raise ValueError(f"rebase shape {new.shape} differs from the filter's {self._x.shape}")
        self._x[...] = new

    def scale(self, factor: float) -> None:
        """The signal's units changed (a frame resized by `factor`): scale the state with it."""
        if self._x is not None and self._dx is not None:
            self._x *= factor
            self._dx *= factor

    def reset(self) -> None:
        """Forget the history: the next sample passes through (use after a cut or a re-acquire)."""
        self._x = None
        self._dx = None
        self._scratch = None

    def filter(self, x: npt.ArrayLike, t: float) -> F64:
        """Filtered value of sample `x` taken at time `t` (seconds); returns a new float64 array."""
        sample = np.asarray(x, dtype=np.float64)
        if self._x is None or self._dx is None or self._scratch is None:
            self._x = sample.copy()
            self._dx = np.zeros_like(self._x)
            self._scratch = np.empty_like(self._x)
            self._t = float(t)
            return self._x.copy()
        if sample.shape != self._x.shape:
            raise ValueError(f"sample shape {sample.shape} differs from the filter's {self._x.shape}")
        dt = float(t) - self._t
        if dt <= 0.0:
            return self._x.copy()
        self._t = float(t)

        # Speed estimate, low-passed at d_cutoff: dx += a_d * ((x - x_prev) / dt - dx).
        raw_speed = self._scratch
        np.subtract(sample, self._x, out=raw_speed)
        raw_speed /= dt
        a_d = 2.0 * math.pi * self.d_cutoff * dt
        a_d /= a_d + 1.0
        raw_speed -= self._dx
        raw_speed *= a_d
        self._dx += raw_speed

        # Speed-dependent cutoff per element, then the same in-place low-pass on the value.
        alpha = self._scratch
        np.abs(self._dx, out=alpha)
        alpha *= self.beta
        alpha += self.min_cutoff
        alpha *= 2.0 * math.pi * dt
        alpha /= alpha + 1.0
        # x_hat = x_prev + alpha * (x - x_prev): a convex combination, so it never leaves the
        # range of the samples seen so far.
        self._x += alpha * (sample - self._x)
        return self._x.copy()

    __call__ = filter
