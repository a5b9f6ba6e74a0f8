"""MAP/PH/1 FCFS queue: matrix-geometric solution and the sojourn-time distribution.

MEAD (Russo Russo et al. 2021, sec. V-A) maps every operator to a single-server
queue with MAP arrivals and phase-type service and solves it with the
matrix-analytic method (Neuts 1984). This module does exactly that for one
queue and returns the sojourn (response) time as a matrix-exponential (ME)
distribution, so a source-to-sink path is the convolution of its queues and
its mean and p95 come out of the same object.

Queue: level n = records in the system, phase (i, j) = (arrival phase,
service phase). With s0 = -S e the service exit vector, the QBD blocks are
    up    A0 = D1 (x) I,       local A1 = D0 (+) S,       down A2 = I (x) s0 beta
and pi_n = pi_1 R^(n-1) for n >= 1, R the minimal solution of
A0 + R A1 + R^2 A2 = 0 (via G from logarithmic reduction, Latouche &
Ramaswami 1993, then R = A0 (-(A1 + A0 G))^-1).

Sojourn time under FCFS: a record that arrives when n >= 1 records are in
the system and the one in service is in phase j waits for that residual
service (PH from phase j), the n-1 records ahead and its own service. Service
times are independent of the arrival process, so with arrival-epoch weights
x_n = pi_1 R^(n-1) Da (Da = diag of arrival rates per phase / lambda) the
sojourn time has the finite ME representation
    [own service | n full services chained by R | residual from phase j]
built below; F(t) = u a - u e^(At) a with u = alpha (-A)^-1. The mean is
alpha A^-2 a. Neither needs truncating the level distribution, so heavy
bursts near saturation cost no more than light load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autoscalers.mead.maps import MAP


@dataclass(frozen=True)
class PH:
    """A phase-type distribution: initial vector beta, sub-generator S."""

    beta: np.ndarray
    S: np.ndarray

    @property
    def exit(self) -> np.ndarray:
        return -self.S.sum(axis=1)

    @property
    def mean(self) -> float:
        return float(self.beta @ np.linalg.solve(-self.S, np.ones(len(self.beta))))


def exponential(mean: float) -> PH:
    return PH(np.array([1.0]), np.array([[-1.0 / mean]]))


def erlang(k: int, mean: float) -> PH:
    rate = k / mean
    S = -rate * np.eye(k) + rate * np.eye(k, k=1)
    beta = np.zeros(k)
    beta[0] = 1.0
    return PH(beta, S)


def ph_from_scv(mean: float, scv: float) -> PH:
    """Erlang-k for SCV < 1 (k = round(1/SCV), at most 8), exponential at 1, balanced H2 above."""
    if scv >= 1.0 + 1e-9:
        p1 = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
        rates = np.array([2.0 * p1 / mean, 2.0 * (1.0 - p1) / mean])
        return PH(np.array([p1, 1.0 - p1]), -np.diag(rates))
    k = int(min(8, max(1, round(1.0 / max(scv, 1e-9)))))
    return exponential(mean) if k == 1 else erlang(k, mean)


def expm_small(M: np.ndarray, order: int = 14) -> np.ndarray:
    """e^M for the small matrices here: scaling and squaring around a Taylor polynomial.

    scipy's expm asks its BLAS for threads; on a machine shared by busy
    processes that made one 36 x 36 exponential cost 30 ms instead of 2.
    Scaled to norm <= 1/2, the order-14 Taylor remainder is below 1e-16.
    """
    norm = float(np.abs(M).sum(axis=0).max())
    squarings = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0.5 else 0
    X = M / (2.0**squarings)
    out = np.eye(M.shape[0])
    term = np.eye(M.shape[0])
    for k in range(1, order + 1):
        term = term @ X / k
        out = out + term
    for _ in range(squarings):
        out = out @ out
    return out


@dataclass(frozen=True)
class ME:
    """Matrix-exponential distribution: density alpha e^(At) a (alpha need not sum to 1)."""

    alpha: np.ndarray
    A: np.ndarray
    a: np.ndarray

    @property
    def mean(self) -> float:
        y = np.linalg.solve(self.A, self.a)
        return float(self.alpha @ np.linalg.solve(self.A, y))

    @property
    def mass(self) -> float:
        return float(self.alpha @ np.linalg.solve(-self.A, self.a))

    def cdf(self, t: float) -> float:
        u = np.linalg.solve(-self.A.T, self.alpha)
        return float(u @ self.a - u @ (expm_small(self.A * t) @ self.a))

    def quantile(self, p: float, steps_per_mean: int = 32, max_steps: int = 4096) -> float:
        """Smallest t with F(t) >= p.

        One matrix exponential for a step of mean/steps_per_mean, then march
        v_k = e^(A dt) v_(k-1) (a matrix-vector product per step) and
        interpolate linearly inside the step that crosses p; if the march gets
        long (heavy tails) the step doubles. A bisection with one expm per
        probe cost 100x more, and F is smooth, so the interpolation error is
        far below the model's own.
        """
        u = np.linalg.solve(-self.A.T, self.alpha)
        total = float(u @ self.a)
        dt = max(self.mean, 1e-15) / steps_per_mean
        E = expm_small(self.A * dt)
        v = self.a.copy()
        t, f_prev = 0.0, 0.0
        for k in range(1, 64 * max_steps):
            v = E @ v
            f = total - float(u @ v)
            if f >= p:
                frac = (p - f_prev) / (f - f_prev) if f > f_prev else 1.0
                return t + frac * dt
            t, f_prev = t + dt, f
            if k % max_steps == 0:
                E, dt = E @ E, 2.0 * dt
                if t > 1e6 * max(self.mean, 1e-15):
                    break
        return math.inf


def convolve(parts: list[ME]) -> ME:
    """Sum of independent ME variables (a path of queues under decomposition)."""
    sizes = [len(p.alpha) for p in parts]
    n = sum(sizes)
    A = np.zeros((n, n))
    alpha = np.zeros(n)
    a = np.zeros(n)
    offs = np.concatenate([[0], np.cumsum(sizes)])
    alpha[: sizes[0]] = parts[0].alpha
    for k, p in enumerate(parts):
        lo, hi = offs[k], offs[k + 1]
        A[lo:hi, lo:hi] = p.A
        if k + 1 < len(parts):
            nxt = parts[k + 1]
            A[lo:hi, hi : offs[k + 2]] = np.outer(p.a, nxt.alpha)
        else:
            a[lo:hi] = p.a
    return ME(alpha, A, a)


@dataclass(frozen=True)
class QueueSolution:
    utilisation: float
    sojourn: ME | None  # None when unstable (utilisation >= 1)

    @property
    def stable(self) -> bool:
        return self.sojourn is not None

    @property
    def mean_response(self) -> float:
        return self.sojourn.mean if self.sojourn is not None else math.inf


def _solve_G(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray, tol: float = 1e-12, max_iter: int = 60) -> np.ndarray:
    """Logarithmic reduction for G (A2 + A1 G + A0 G^2 = 0).

    Stops when G is stochastic to `tol` or when a further step adds nothing
    (B0 or B2 vanished): near saturation rounding keeps 1 - G e from reaching
    `tol`, and iterating on would make I - U singular.
    """
    d = A1.shape[0]
    inv = np.linalg.inv(-A1)
    B0, B2 = inv @ A0, inv @ A2
    G, T = B2.copy(), B0.copy()
    eye = np.eye(d)
    with np.errstate(over="raise", invalid="raise"):
        for _ in range(max_iter):
            U = B0 @ B2 + B2 @ B0
            M = np.linalg.inv(eye - U)
            B0, B2 = M @ B0 @ B0, M @ B2 @ B2
            step = T @ B2
            G = G + step
            T = T @ B0
            if np.max(np.abs(1.0 - G.sum(axis=1))) < tol or np.abs(step).max() < tol * 1e-3:
                break
    return G


def solve_map_ph_1(arrivals: MAP, service: PH) -> QueueSolution:
    """Stationary MAP/PH/1 FCFS queue; the sojourn time as an ME distribution."""
    D0, D1 = arrivals.D0, arrivals.D1
    ma, ms = arrivals.order, len(service.beta)
    lam = arrivals.rate
    rho = lam * service.mean
    if rho >= 1.0 - 1e-9:
        return QueueSolution(rho, None)
    beta, S, s0 = service.beta, service.S, service.exit
    Ia, Is = np.eye(ma), np.eye(ms)
    A0 = np.kron(D1, Is)
    A1 = np.kron(D0, Is) + np.kron(Ia, S)
    A2 = np.kron(Ia, np.outer(s0, beta))
    try:
        G = _solve_G(A0, A1, A2)
        R = A0 @ np.linalg.inv(-(A1 + A0 @ G))
    except (np.linalg.LinAlgError, FloatingPointError):
        return QueueSolution(rho, None)  # numerically at saturation: treat as unstable (errs safe)
    residual = A0 + R @ A1 + R @ R @ A2
    if not np.all(np.isfinite(R)) or np.abs(residual).max() > 1e-6 * max(1.0, np.abs(A1).max()):
        return QueueSolution(rho, None)
    d = ma * ms
    # Boundary: pi0 D0 + pi1 (I (x) s0) = 0 ; pi0 (D1 (x) beta) + pi1 (A1 + R A2) = 0 ; normalisation.
    B01 = np.kron(D1, beta[None, :])
    B10 = np.kron(Ia, s0[:, None])
    M = np.block([[D0, B01], [B10, A1 + R @ A2]])
    norm = np.concatenate([np.ones(ma), np.linalg.solve(np.eye(d) - R, np.ones(d))])
    M[:, 0] = norm
    rhs = np.zeros(ma + d)
    rhs[0] = 1.0
    try:
        x = np.linalg.solve(M.T, rhs)
    except np.linalg.LinAlgError:
        return QueueSolution(rho, None)
    pi0, pi1 = x[:ma], x[ma:]
    arr = D1.sum(axis=1)
    p0 = float(pi0 @ arr) / lam  # arrival finds the system empty
    W = np.kron((arr / lam)[:, None], Is)  # rows (i, j), cols j
    # ME blocks: own service | Q (d x ms) | residual (ms).
    nq = d * ms
    n = ms + nq + ms
    A = np.zeros((n, n))
    A[:ms, :ms] = S
    A[ms : ms + nq, ms : ms + nq] = np.kron(np.eye(d), S) + np.kron(R, np.outer(s0, beta))
    A[ms : ms + nq, ms + nq :] = np.kron(W, s0[:, None])
    A[ms + nq :, ms + nq :] = S
    alpha = np.concatenate([p0 * beta, np.kron(pi1, beta), np.zeros(ms)])
    a = np.concatenate([s0, np.zeros(nq), s0])
    return QueueSolution(rho, ME(alpha, A, a))
