"""Markovian Arrival Processes: descriptors, sampling and a small MAP(2) fit (MEAD, sec. IV).

A MAP(N) is a pair (D0, D1) of N x N matrices: D0 holds the hidden
transitions, D1 the ones that emit an arrival, and D0 + D1 is a CTMC
generator (Russo Russo et al. 2021, sec. IV-A). Moments and lag-k
autocorrelations follow eqs. (1) and (2) of the paper:
    E[X^n] = n! pi_e (-D0)^-n e,     P = (-D0)^-1 D1,  pi_e P = pi_e
    rho_k  = (pi_e (-D0)^-1 P^k (-D0)^-1 e - E[X]^2) / Var[X]

Why our own fit and not KPC-Toolbox: MEAD fits with KPC-Toolbox (a MAP(2^J)
by non-linear least squares). The `line-solver` package on PyPI (3.0.8, a
native-Python port of LINE that ships KPC-Toolbox) was evaluated here: it
installs offline-capable, but `kpcfit_auto` took 65 s on 25,000 inter-arrival
times with reduced restarts (target: 5 s per decision) and returned a MAP whose
SCV was 578 for a trace with SCV 10; importing it takes 4-7 s and it pulls in an
MCP server stack (mcp, uvicorn, starlette, cryptography). So we match the three
descriptors that matter most for the queue - mean, SCV and lag-1
autocorrelation - in closed form with a MAP(2), which takes microseconds:

- SCV > 1: a hyper-exponential H2 marginal (branch probability p, means
  m1 < m2) made correlated by the embedded chain P = (1-g) 1 p' + g I. The
  stationary distribution of P is p, so the marginal stays H2(p; m1, m2),
  and rho_k = g^k (c^2 - 1) / (2 c^2) for every member of the H2 family with
  that mean and SCV. Hence g = rho_1 * 2 c^2 / (c^2 - 1), clipped to what
  keeps P non-negative. The H2 family with a fixed mean and SCV has one free
  parameter (p); it sets the third moment, so MEAD's "best n fits" become
  the n members whose third moment is closest to the sample's.
- SCV ~ 1 with no correlation: Poisson (a MAP(1)).
- SCV < 1: a renewal hypo-exponential MAP(2) (two phases in series); SCV
  below 0.5 (a MAP(2)'s limit) is clamped to 0.5, which errs on the safe side.

These shapes are fitted to inter-arrival times normalised to mean 1 and
rescaled in time per queue (`scale_to_rate`): that keeps burstiness measured
in *arrivals*, not seconds. For bursty input MEAD prefers `fit_mmpp2`: a
2-state MMPP fitted in real time (least squares on SCV, lag-1
autocorrelation and the decay of the autocorrelation, mean exact), carried
to another rate by scaling its arrival rates only (`mmpp_at_rate`), so that a
burst lasts as many seconds in a thinned sample, in one subtask's share and
in the whole stream.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MAP:
    """A Markovian Arrival Process (D0 hidden, D1 observable transitions)."""

    D0: np.ndarray
    D1: np.ndarray

    @property
    def order(self) -> int:
        return int(self.D0.shape[0])

    def embedded_stationary(self) -> np.ndarray:
        """pi_e: stationary vector of P = (-D0)^-1 D1 (the phase seen just after an arrival)."""
        P = np.linalg.solve(-self.D0, self.D1)
        return _stationary_dtmc(P)

    def stationary(self) -> np.ndarray:
        """Stationary vector of the CTMC generator D0 + D1."""
        return _stationary_ctmc(self.D0 + self.D1)

    @property
    def rate(self) -> float:
        """Arrivals per unit time: pi (D1 e)."""
        return float(self.stationary() @ self.D1.sum(axis=1))

    def moment(self, n: int) -> float:
        """E[X^n] = n! pi_e (-D0)^-n e (eq. 1)."""
        M = np.linalg.inv(-self.D0)
        v = self.embedded_stationary() @ np.linalg.matrix_power(M, n)
        return float(math.factorial(n) * v.sum())

    @property
    def mean(self) -> float:
        return self.moment(1)

    @property
    def scv(self) -> float:
        m1, m2 = self.moment(1), self.moment(2)
        return m2 / m1**2 - 1.0

    def acf(self, lag: int = 1) -> float:
        """Lag-k autocorrelation of the inter-arrival times (eq. 2)."""
        M = np.linalg.inv(-self.D0)
        P = M @ self.D1
        pe = self.embedded_stationary()
        m1, m2 = self.moment(1), self.moment(2)
        joint = pe @ M @ np.linalg.matrix_power(P, lag) @ M @ np.ones(self.order)
        return float((joint - m1**2) / (m2 - m1**2)) if m2 > m1**2 else 0.0

    def scale_to_rate(self, rate: float) -> MAP:
        """The same shape (SCV, autocorrelations) at another arrival rate: time runs faster."""
        factor = rate / self.rate
        return MAP(self.D0 * factor, self.D1 * factor)


def poisson(rate: float = 1.0) -> MAP:
    return MAP(np.array([[-rate]]), np.array([[rate]]))


def mmpp2(rate1: float, rate2: float, switch12: float, switch21: float) -> MAP:
    """2-state Markov-modulated Poisson process (bursty when the rates differ a lot)."""
    D0 = np.array([[-(rate1 + switch12), switch12], [switch21, -(rate2 + switch21)]])
    return MAP(D0, np.diag([rate1, rate2]))


def h2_family_bounds(scv: float) -> tuple[float, float]:
    """Open interval of the H2 branch probability p1 for a given SCV > 1 (mean-normalised)."""
    return (scv - 1.0) / (scv + 1.0), 1.0


def correlated_h2(mean: float, scv: float, p1: float, rho1: float) -> MAP:
    """H2(p; m1, m2) with mean and SCV exact, lag-1 autocorrelation rho1 as far as feasible.

    m1 = m (1 - sqrt(k p2 / p1)), m2 = m (1 + sqrt(k p1 / p2)), k = (c^2 - 1) / 2
    (then p1 m1 + p2 m2 = m and E[X^2] = (1 + c^2) m^2 for any admissible p1).
    """
    if scv <= 1.0:
        raise ValueError("correlated_h2 needs SCV > 1")
    lo, hi = h2_family_bounds(scv)
    p1 = float(np.clip(p1, lo + 1e-9, hi - 1e-9))
    p2 = 1.0 - p1
    k = (scv - 1.0) / 2.0
    m1 = mean * (1.0 - math.sqrt(k * p2 / p1))
    m2 = mean * (1.0 + math.sqrt(k * p1 / p2))
    lam = np.array([1.0 / m1, 1.0 / m2])
    p = np.array([p1, p2])
    rho_max = (scv - 1.0) / (2.0 * scv)
    g = rho1 / rho_max
    g_min = max(-p1 / (1.0 - p1), -p2 / (1.0 - p2))
    g = float(np.clip(g, g_min, 0.999))
    P = (1.0 - g) * np.outer(np.ones(2), p) + g * np.eye(2)
    return MAP(-np.diag(lam), np.diag(lam) @ P)


def hypoexponential(mean: float, scv: float) -> MAP:
    """Renewal MAP(2) with two exponential phases in series (0.5 <= SCV <= 1)."""
    scv = float(np.clip(scv, 0.5, 1.0))
    # Phase means a, b with a + b = mean and (a^2 + b^2) / mean^2 = scv.
    disc = max(0.0, 2.0 * scv - 1.0)
    a = mean * (1.0 + math.sqrt(disc)) / 2.0
    b = mean - a
    if b <= 1e-12 * mean:
        return poisson(1.0 / mean)
    D0 = np.array([[-1.0 / a, 1.0 / a], [0.0, -1.0 / b]])
    D1 = np.array([[0.0, 0.0], [1.0 / b, 0.0]])
    return MAP(D0, D1)


@dataclass(frozen=True)
class TraceStats:
    """The descriptors the fit matches (of inter-arrival times normalised to mean 1)."""

    n: int
    mean: float  # of the raw sample, seconds
    scv: float
    rho1: float
    m3: float  # third moment of the normalised sample


def trace_stats(x: np.ndarray) -> TraceStats:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x) & (x >= 0)]
    if len(x) < 3 or x.mean() <= 0:
        raise ValueError(f"need at least 3 positive inter-arrival times, got {len(x)}")
    mean = float(x.mean())
    y = x / mean
    scv = float(y.var())
    rho1 = float(np.corrcoef(y[:-1], y[1:])[0, 1]) if y.std() > 0 else 0.0
    return TraceStats(n=len(x), mean=mean, scv=scv, rho1=0.0 if math.isnan(rho1) else rho1, m3=float((y**3).mean()))


def fit_map2(x: np.ndarray, n_best: int = 1, poisson_tol: float = 0.05) -> list[MAP]:
    """The `n_best` MAP(2)s (mean 1) that match mean, SCV and lag-1 autocorrelation of `x`.

    Ranked by the relative error of their third moment against the sample's
    (only the SCV > 1 family has more than one member).
    """
    s = trace_stats(x)
    if abs(s.scv - 1.0) <= poisson_tol and abs(s.rho1) <= poisson_tol:
        return [poisson(1.0)]
    if s.scv <= 1.0:
        return [hypoexponential(1.0, s.scv)]
    lo, hi = h2_family_bounds(s.scv)
    # Candidates spread over the admissible p1 (denser near the ends, where m3 moves fastest).
    u = np.linspace(0.02, 0.98, 25)
    p1s = lo + (hi - lo) * (1 - (1 - u) ** 2)
    cands = [correlated_h2(1.0, s.scv, float(p), s.rho1) for p in p1s]
    errs = [abs(c.moment(3) - s.m3) / max(s.m3, 1e-12) for c in cands]
    order = np.argsort(errs, kind="stable")
    return [cands[i] for i in order[: max(1, n_best)]]


# ---------------------------------------------------------------- MMPP(2) in real time


def is_mmpp(m: MAP) -> bool:
    """Arrivals never change the phase (D1 diagonal): a Markov-modulated Poisson process."""
    return bool(np.count_nonzero(m.D1 - np.diag(np.diag(m.D1))) == 0)


def mmpp_at_rate(m: MAP, rate: float) -> MAP:
    """The same modulation (burst durations in seconds) with arrival rates scaled to `rate`.

    This is what splitting a stream over subtasks, filtering it or thinning a
    sample does to an MMPP: rates scale, the modulating chain keeps its clock.
    (`MAP.scale_to_rate` instead speeds the whole process up, bursts included.)
    """
    if not is_mmpp(m):
        raise ValueError("mmpp_at_rate needs an MMPP (diagonal D1)")
    lam = np.diag(m.D1) * (rate / m.rate)
    Q = m.D0 + m.D1
    return MAP(Q - np.diag(lam), np.diag(lam))


def acf_decay(x: np.ndarray, max_lags: int = 24) -> tuple[float, float]:
    """(lag-1 autocorrelation, geometric decay gamma of rho_k = rho_1 gamma^(k-1)) of a sample.

    gamma comes from a log-linear fit over log-spaced lags whose autocorrelation
    is significant (> 2 / sqrt(n)); with fewer than two of them, rho_2 / rho_1.
    """
    y = np.asarray(x, dtype=float)
    y = y - y.mean()
    var = float((y * y).mean())
    n = len(y)
    if n < 10 or var <= 0:
        return 0.0, 0.0

    def rho(k: int) -> float:
        return float((y[:-k] * y[k:]).mean() / var)

    r1 = rho(1)
    lags = np.unique(np.round(np.logspace(0, np.log10(max(2, n // 10)), max_lags)).astype(int))
    vals = np.array([rho(int(k)) for k in lags])
    sig = vals > 2.0 / math.sqrt(n)
    if r1 > 0 and sig.sum() >= 2:
        k, v = lags[sig].astype(float), vals[sig]
        slope = np.polyfit(k - 1.0, np.log(v), 1, w=np.sqrt(v))[0]
        gamma = math.exp(min(0.0, float(slope)))
    else:
        gamma = rho(2) / r1 if r1 > 1e-9 else 0.0
    return r1, float(np.clip(gamma, 0.0, 0.99999))


# theta bounds: burst/quiet rate ratio in (1, 1000], burst probability in [0.001, 0.999], and the
# modulation slower than the arrivals (switching speed <= mean rate: a burst holds several records).
_MMPP_BOUNDS = (np.array([-9.0, -6.9, -16.0]), np.array([math.log(999.0), 6.9, 0.0]))


def _mmpp2_from(theta: np.ndarray, rate: float) -> MAP:
    """theta = (log(f - 1), logit(pi_burst), log(switching speed / rate)); mean rate fixed."""
    f = 1.0 + math.exp(theta[0])
    pb = 1.0 / (1.0 + math.exp(-theta[1]))
    speed = rate * math.exp(theta[2])
    lam1 = rate / (1.0 - pb + pb * f)
    return mmpp2(lam1, f * lam1, speed * pb, speed * (1.0 - pb))


def _mmpp2_descriptors(m: MAP) -> tuple[float, float, float]:
    """(SCV, rho_1, decay) of a 2-state MAP in closed form (the fit calls this thousands of times).

    M = (-D0)^-1, P = M D1 with stationary pi; E[X] = pi M e, E[X^2] = 2 pi M^2 e,
    E[X_0 X_1] = pi M P M e (eq. 1, 2); decay = second eigenvalue of P = trace(P) - 1.
    """
    (a, b), (c, d) = -m.D0
    det = a * d - b * c
    M = ((d / det, -b / det), (-c / det, a / det))
    (e, f), (g, h) = m.D1
    P = (
        (M[0][0] * e + M[0][1] * g, M[0][0] * f + M[0][1] * h),
        (M[1][0] * e + M[1][1] * g, M[1][0] * f + M[1][1] * h),
    )
    p12, p21 = P[0][1], P[1][0]
    pi = (p21 / (p12 + p21), p12 / (p12 + p21)) if p12 + p21 > 0 else (0.5, 0.5)
    Me = (M[0][0] + M[0][1], M[1][0] + M[1][1])
    M2e = (M[0][0] * Me[0] + M[0][1] * Me[1], M[1][0] * Me[0] + M[1][1] * Me[1])
    PMe = (P[0][0] * Me[0] + P[0][1] * Me[1], P[1][0] * Me[0] + P[1][1] * Me[1])
    MPMe = (M[0][0] * PMe[0] + M[0][1] * PMe[1], M[1][0] * PMe[0] + M[1][1] * PMe[1])
    m1 = pi[0] * Me[0] + pi[1] * Me[1]
    m2 = 2.0 * (pi[0] * M2e[0] + pi[1] * M2e[1])
    joint = pi[0] * MPMe[0] + pi[1] * MPMe[1]
    var = m2 - m1 * m1
    return var / (m1 * m1), (joint - m1 * m1) / var if var > 0 else 0.0, P[0][0] + P[1][1] - 1.0


def fit_mmpp2(x: np.ndarray, n_best: int = 1) -> list[tuple[MAP, float]]:
    """MMPP(2)s in real time matching mean, SCV, lag-1 autocorrelation and its decay; (MAP, misfit).

    Least squares from a few starts (scipy); distinct solutions ranked by misfit.
    Only for bursty samples (SCV > 1, positive autocorrelation); [] otherwise.
    """
    from scipy.optimize import least_squares

    s = trace_stats(x)
    r1, gamma = acf_decay(x)
    if s.scv <= 1.05 or r1 <= 0.01:
        return []
    rate = 1.0 / s.mean
    target_slow = math.log(max(1e-6, 1.0 - gamma))

    def residuals(theta: np.ndarray) -> np.ndarray:
        try:
            scv, rho1, decay = _mmpp2_descriptors(_mmpp2_from(theta, rate))
        except (np.linalg.LinAlgError, OverflowError, ValueError):
            return np.full(3, 1e3)
        return np.array(
            [
                math.log(max(scv, 1e-9) / s.scv),
                (rho1 - r1) / max(r1, 0.02),
                0.5 * (math.log(max(1e-9, 1.0 - decay)) - target_slow),
            ]
        )

    found: list[tuple[MAP, float]] = []
    speed0 = math.log(max(1e-6, 1.0 - gamma))
    for f0 in (2.0, 8.0):
        for pb0 in (0.1, 0.3):
            theta0 = np.clip([math.log(f0 - 1.0), math.log(pb0 / (1.0 - pb0)), speed0], *_MMPP_BOUNDS)
            with np.errstate(all="ignore"):
                res = least_squares(residuals, theta0, bounds=_MMPP_BOUNDS, max_nfev=150)
            if not np.all(np.isfinite(res.x)):
                continue
            try:
                m = _mmpp2_from(res.x, rate)
            except (OverflowError, ValueError):
                continue
            cost = float(np.sum(res.fun**2))
            if all(abs(cost - c) > 1e-9 or not np.allclose(m.D1, o.D1, rtol=1e-4) for o, c in found):
                found.append((m, cost))
    found.sort(key=lambda mc: mc[1])
    return found[: max(1, n_best)]


def sample(m: MAP, n: int, rng: np.random.Generator) -> np.ndarray:
    """n inter-arrival times drawn from the MAP (for tests, benchmarks and synthetic traces)."""
    if np.count_nonzero(m.D1 - np.diag(np.diag(m.D1))) == 0:
        return _sample_mmpp(m, n, rng)
    return _sample_general(m, n, rng)


def _sample_general(m: MAP, n: int, rng: np.random.Generator) -> np.ndarray:
    """Simulate the CTMC jump by jump: hidden moves (D0) and arrivals (D1)."""
    N = m.order
    rates = -np.diag(m.D0)
    # Jump probabilities from each phase: hidden moves (D0 off-diagonal) then arrivals (D1).
    hidden = m.D0.copy()
    np.fill_diagonal(hidden, 0.0)
    probs = np.hstack([hidden, m.D1]) / rates[:, None]
    cum = np.cumsum(probs, axis=1)
    out = np.empty(n)
    phase = int(rng.choice(N, p=m.embedded_stationary()))
    elapsed = 0.0
    i = 0
    exp = rng.standard_exponential(size=8 * n + 64)
    uni = rng.random(size=8 * n + 64)
    k = 0
    while i < n:
        if k >= len(exp):
            exp = rng.standard_exponential(size=len(exp))
            uni = rng.random(size=len(uni))
            k = 0
        elapsed += exp[k] / rates[phase]
        j = int(np.searchsorted(cum[phase], uni[k] * cum[phase, -1], side="right"))
        k += 1
        if j >= N:  # an arrival
            out[i] = elapsed
            elapsed = 0.0
            i += 1
            phase = j - N
        else:
            phase = j
    return out


def _sample_mmpp(m: MAP, n: int, rng: np.random.Generator) -> np.ndarray:
    """MMPP (diagonal D1): sojourns of the modulating chain, Poisson arrivals within each (vectorised)."""
    lam = np.diag(m.D1).copy()
    Q = m.D0 + m.D1
    leave = -np.diag(Q)
    if np.any(leave <= 0):  # an absorbing modulating state: fall back to the general sampler
        return _sample_general(m, n, rng)
    N = m.order
    jump = Q / leave[:, None] + np.eye(N)  # embedded chain of the modulating CTMC (zero diagonal)
    cum = [list(np.cumsum(row) / row.sum()) for row in jump]
    expected_per_sojourn = float(m.stationary() @ (lam / leave))
    k = int(1.5 * (n + 1) / max(expected_per_sojourn, 1e-12)) + 64
    seq = [0] * k
    u = rng.random(k).tolist()
    state = int(rng.choice(N, p=m.stationary()))
    for i in range(k):
        seq[i] = state
        state = min(N - 1, bisect.bisect_right(cum[state], u[i]))
    states = np.array(seq, dtype=np.int64)
    tau = rng.standard_exponential(k) / leave[states]
    counts = rng.poisson(lam[states] * tau)
    starts = np.concatenate([[0.0], np.cumsum(tau)[:-1]])
    t = np.sort(np.repeat(starts, counts) + rng.random(int(counts.sum())) * np.repeat(tau, counts))
    if len(t) < n + 1:
        more = _sample_mmpp(m, n + 1 - len(t) + 1, rng)
        t = np.concatenate([t, t[-1] + np.cumsum(more)]) if len(t) else np.cumsum(more)
    return np.diff(t[: n + 1])


def _stationary_ctmc(Q: np.ndarray) -> np.ndarray:
    n = Q.shape[0]
    A = np.vstack([Q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    pi = np.clip(pi, 0.0, None)  # round-off can leave -1e-17 where a phase is never visited
    return pi / pi.sum()


def _stationary_dtmc(P: np.ndarray) -> np.ndarray:
    return _stationary_ctmc(P - np.eye(P.shape[0]))
