"""What one run measured, and how a sim cell compares with the same local cell (pure).

Per run (`run_metrics`): task-manager-minutes (area under the registered task managers), average
task managers, latency avg and p95 under both definitions (the thesis' time in Kafka,
`latency_kafka`, and the end-to-end sink latency `latency_e2e_*` where the run recorded it),
the number of scaling actions, the time of the first one, and the load shortfall (records the
pattern asked for that the job never saw: generator skips plus Kafka expiries, over the pattern's
total). Unknown stays NaN.

Per cell (`compare_cell`): the sim's mean over its repetitions (with a 95 % CI) against the local
value, as relative differences, and the issue's targets: task-manager-minutes within 15 %, p95
latency within 30 % (or 1 s when both are under 2 s), scale count within +/- 2. Across cells
(`rank_agreement`): Kendall's tau between the local and the sim ordering of the autoscalers on
avg task managers and on avg latency, per group of cells that differ only in the autoscaler and
pooled over all cells; with several local runs per cell, the same tau between the local repetitions
themselves (`repeat_agreement`): the real system's own repeatability, against which the sim's is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from harness.analysis.metrics import MeanCI, mean_ci, percentile, replica_minutes, time_weighted_mean
from harness.record import RunRecord
from harness.vocabulary import EventKind, Metric

METRICS = ("tm_minutes", "avg_tm", "latency_avg", "latency_p95", "e2e_avg", "e2e_p95", "scale_count",
           "first_action_s", "load_shortfall")
LABELS = {
    "tm_minutes": "TM-minutes", "avg_tm": "avg TMs", "latency_avg": "latency avg (s)",
    "latency_p95": "latency p95 (s)", "e2e_avg": "e2e latency avg (s)", "e2e_p95": "e2e latency p95 (s)",
    "scale_count": "scale count", "first_action_s": "first action (s)", "load_shortfall": "load shortfall",
}
TM_TOLERANCE = 0.15
P95_TOLERANCE = 0.30
P95_ABS_S = 1.0  # when both p95 are under P95_SMALL_S, an absolute tolerance
P95_SMALL_S = 2.0
SCALE_TOLERANCE = 2


@dataclass(frozen=True)
class RunMetrics:
    values: dict[str, float]
    status: str
    why: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> float:
        return self.values.get(key, math.nan)


def _series(rec: RunRecord, metric: str, end: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A metric's samples up to `end` (the experiment's duration): a local run whose loop overran its
    duration on a busy host recorded past it, and both sides must be compared over the same window."""
    s = rec.series(metric).dropna().sort_index()
    if end is not None:
        s = s[s.index <= end]
    return s.index.to_numpy(dtype=float), s.to_numpy(dtype=float)


def pattern_total(rec: RunRecord) -> float:
    """Records the pattern asked for over the run (from its recorded config: deterministic)."""
    from harness.config import Experiment
    from workloads.patterns import build_pattern

    exp = Experiment.model_validate(rec.meta["config"])
    pat = build_pattern(exp.pattern, exp.seed, exp.query)
    return float(pat.records_between(0.0, float(rec.meta.get("duration_s") or pat.duration_s)))


def run_metrics(rec: RunRecord) -> RunMetrics:
    end = float(rec.meta.get("duration_s") or 0.0) or None
    why: dict[str, str] = {}
    v: dict[str, float] = {}
    t, tms = _series(rec, Metric.TASKMANAGERS, end)
    v["tm_minutes"] = replica_minutes(t, tms, end)
    v["avg_tm"] = time_weighted_mean(t, tms, end)
    _, lat = _series(rec, Metric.LATENCY_KAFKA, end)
    v["latency_avg"] = float(lat.mean()) if len(lat) else math.nan
    v["latency_p95"] = percentile(lat, 95)
    _, e2e = _series(rec, Metric.LATENCY_E2E_MEAN, end)
    _, e2e95 = _series(rec, Metric.LATENCY_E2E_P95, end)
    v["e2e_avg"] = float(e2e.mean()) if len(e2e) else math.nan
    v["e2e_p95"] = percentile(e2e95, 95) if len(e2e95) else math.nan  # p95 over the run of the interval p95s
    if not len(e2e):
        why["e2e_avg"] = why["e2e_p95"] = "no end-to-end latency series in the run record"
    actions = [a for a in rec.events_of(EventKind.ACTION) if end is None or a["ts"] <= end]
    v["scale_count"] = float(len(actions))
    v["first_action_s"] = float(min(a["ts"] for a in actions)) if actions else math.nan
    if not actions:
        why["first_action_s"] = "no scaling action"
    lost = 0.0
    known = True
    for metric in (Metric.SKIPPED_TOTAL, Metric.EXPIRED_TOTAL):
        _, vals = _series(rec, metric, end)
        if len(vals):
            lost += float(vals[-1])
        elif metric == Metric.SKIPPED_TOTAL and rec.meta.get("config", {}).get("backend") == "sim":
            pass  # the simulator offers every record: nothing is ever skipped
        elif metric == Metric.EXPIRED_TOTAL and not (rec.meta.get("config", {}).get("kafka") or {}).get("retention_s"):
            pass  # no retention: nothing expires
        else:
            known = False
            why["load_shortfall"] = f"{metric} not recorded"
    try:
        total = pattern_total(rec)
    except Exception as exc:  # noqa: BLE001 - an old record without a config: unknown
        total, known = math.nan, False
        why["load_shortfall"] = f"pattern total unknown: {exc}"
    v["load_shortfall"] = lost / total if known and total > 0 else math.nan
    return RunMetrics(v, rec.status, why)


@dataclass(frozen=True)
class CellComparison:
    cell_id: str
    group: str  # the cell without its autoscaler
    autoscaler: str
    local: dict[str, MeanCI]
    sim: dict[str, MeanCI]
    rel: dict[str, float]  # (sim - local) / |local|
    checks: dict[str, bool | None]  # target met, None when not measurable
    local_runs: dict[int, dict[str, float]] = field(default_factory=dict)  # repetition number -> its values


def rel_diff(sim: float, local: float) -> float:
    if not (math.isfinite(sim) and math.isfinite(local)):
        return math.nan
    if local == 0.0:
        return 0.0 if sim == 0.0 else math.inf
    return (sim - local) / abs(local)


def compare_cell(cell_id: str, group: str, autoscaler: str, local: Sequence[RunMetrics],
                 sim: Sequence[RunMetrics], local_reps: Sequence[int] | None = None) -> CellComparison:
    """`local_reps`: the repetition number of each local run (default 0, 1, ...), so a missing run never shifts
    another into its place when the local runs are ranked against each other."""
    lo = {k: mean_ci([r[k] for r in local]) for k in METRICS}
    si = {k: mean_ci([r[k] for r in sim]) for k in METRICS}
    rel = {k: rel_diff(si[k].mean, lo[k].mean) for k in METRICS}
    checks: dict[str, bool | None] = {}
    checks["tm_minutes"] = None if math.isnan(rel["tm_minutes"]) else abs(rel["tm_minutes"]) <= TM_TOLERANCE
    for key in ("latency_p95", "e2e_p95"):
        a, b = si[key].mean, lo[key].mean
        if not (math.isfinite(a) and math.isfinite(b)):
            checks[key] = None
        elif a < P95_SMALL_S and b < P95_SMALL_S:
            checks[key] = abs(a - b) <= P95_ABS_S
        else:
            checks[key] = abs(rel_diff(a, b)) <= P95_TOLERANCE
    a, b = si["scale_count"].mean, lo["scale_count"].mean
    checks["scale_count"] = None if not (math.isfinite(a) and math.isfinite(b)) else abs(a - b) <= SCALE_TOLERANCE
    reps = range(len(local)) if local_reps is None else local_reps
    return CellComparison(cell_id, group, autoscaler, lo, si, rel, checks,
                          {n: {k: r[k] for k in METRICS} for n, r in zip(reps, local, strict=True)})


@dataclass(frozen=True)
class Tau:
    scope: str  # a group, or "all cells"
    metric: str
    tau: float
    p_value: float
    n: int


def kendall(local: Sequence[float], sim: Sequence[float]) -> tuple[float, float, int]:
    pairs = [(a, b) for a, b in zip(local, sim, strict=True) if math.isfinite(a) and math.isfinite(b)]
    if len(pairs) < 2:
        return math.nan, math.nan, len(pairs)
    res = stats.kendalltau([p[0] for p in pairs], [p[1] for p in pairs])
    return float(res.statistic), float(res.pvalue), len(pairs)


RANKED_METRICS = ("avg_tm", "latency_avg")  # the ranking targets
POOLED = "all cells"


def _scopes(cells: Sequence[CellComparison]) -> list[tuple[str, list[CellComparison]]]:
    """Each group of cells (one query x pattern, the autoscalers varied), then all of them pooled."""
    groups = sorted({c.group for c in cells})
    return [*((g, [c for c in cells if c.group == g]) for g in groups), (POOLED, list(cells))]


def rank_agreement(cells: Sequence[CellComparison], metrics: Sequence[str] = RANKED_METRICS) -> list[Tau]:
    """Kendall's tau between local and sim per group (the autoscalers of one query x pattern) and pooled."""
    out: list[Tau] = []
    for metric in metrics:
        for scope, mine in _scopes(cells):
            tau, p, n = kendall([c.local[metric].mean for c in mine], [c.sim[metric].mean for c in mine])
            out.append(Tau(scope, metric, tau, p, n))
    return out


def repeat_agreement(cells: Sequence[CellComparison], metrics: Sequence[str] = RANKED_METRICS) -> list[Tau]:
    """Kendall's tau of the real system with itself: each pair of local repetitions (by their numbers) ranked
    against each other, per group and pooled, over the cells that have both; scopes with fewer than two such
    cells are left out. How far a sim-vs-local tau can be read: where one local run's ranking does not repeat,
    no model can agree with it better than that. Empty with one local run per cell."""
    numbers = sorted({n for c in cells for n in c.local_runs})
    out: list[Tau] = []
    for metric in metrics:
        for a, i in enumerate(numbers):
            for j in numbers[a + 1:]:
                both = [c for c in cells if i in c.local_runs and j in c.local_runs]
                for scope, mine in _scopes(both):
                    if len(mine) < 2:
                        continue
                    tau, p, n = kendall([c.local_runs[i][metric] for c in mine],
                                        [c.local_runs[j][metric] for c in mine])
                    out.append(Tau(f"{scope}: local r{i} vs r{j}", metric, tau, p, n))
    return out
