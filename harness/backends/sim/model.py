"""The simulator core: Kafka topics feeding a Flink job graph, advanced in fixed steps.

A fluid model, pure (no I/O, no clocks): records are real-valued amounts.
Each step
1. the arrivals of the step enter each source's Kafka queue (FIFO buckets);
2. every operator wants to process min(capacity, available input), where
   capacity = per-subtask records/s x CPU share x effective subtasks
   (vertical scaling scales a subtask's speed: MEAD / MPC's frequency knob);
3. in reverse topological order each operator processes what it wants, limited
   by the free space of its downstream input buffers (credit-based flow
   control); the shortfall is time blocked on output = backpressure. A slow
   operator fills its input buffer, its upstream blocks, and eventually the
   source reads less from Kafka, so the lag grows (thesis ch. 2.3);
4. outputs (input x selectivity) land in downstream buffers, processed the
   next step (one step of pipelining per hop).

Uneven subtasks: a source's Kafka partitions and a keyed operator's key
groups are spread over the subtasks in whole units (U units on p subtasks:
some hold ceil(U / p), the rest floor(U / p)). A keyed operator's upstream
blocks as soon as one downstream channel runs out of credit, so the busiest
subtask caps the whole operator at U / ceil(U / p) subtasks' worth of
capacity (e.g. 128 key groups on 5 subtasks: 4.92). Kafka partitions are
independent, so a source is modelled as (at most two) partition groups with
their own FIFO backlog: the overloaded group lags while the other keeps up.
Stateless operators split evenly.

A rescale stops all processing for a downtime (sources keep receiving),
measured in seconds from the moment it is applied; a partly covered step
processes for the uncovered fraction.

Costs come from `harness.backends.sim.costs` (the calibrated profile): a subtask's
capacity is what its CPU (share x the task manager's cores) buys, and where the
profile says so it shrinks as the subtask's state grows (recomputed every
`RECOST_EVERY_S`). Where the profile measured it, a fresh task manager starts slow and warms up
(`WarmUp`, by the CPU time it has had): every subtask remembers when its task manager began
processing (the run's start, or the end of the rescale that added it; a scale-down keeps the
longest-running ones), and an operator runs at its subtasks' mean warm-up fraction, or at its slowest
subtask's where that one caps it (a keyed or round-robin input: the upstream blocks when one channel runs out of
credit, as for uneven key groups above), recomputed every `RECOST_EVERY_S` until all are warm. Kafka
partitions per topic are the experiment's, and Kafka retention (thesis ch. 6.3.1: 5 min, checked every 5 s)
deletes closed log segments older than the retention time: those records are lost load (`expired`), never
processed.

Latency, two quantities at step resolution (METRICS.md):
- time in Kafka (the thesis' `latency_kafka`): age of the records a source
  takes from its FIFO; in a step in which no source emitted, the age of the
  oldest record still waiting (its wait keeps growing through an outage;
  0 when nothing waits); the readout reports the sources' event-time lag
  gauge (`O_RECLAG`) as `latency_kafka`, as the local stack does, and these
  ages as its max;
- end-to-end (`latency_e2e`): every operator's input buffer is a FIFO of
  records that carry their event-time step, so a record's age when a sink
  processes it is its time in Kafka plus its queueing in every buffer on its
  path, including any downtime it sat through. A step in which no record
  reached a sink has no sample (NaN, a gap); the delayed records show their
  latency when they come out. The one step per hop that the
  step-wise pipelining adds is not latency (a record passes an idle operator
  well within a step), so each hop moves the carried step forward by one.
  Ages go into the sink histogram of `harness.metrics.latency` (the buckets
  the real sink exports). Outputs of joins carry the event time of the
  inputs that produced them. An event-time window (`fires_on_watermark`)
  emits a result once the watermark passes the window's end, and the result
  carries that end: so its outputs carry the watermark's event time where it
  is older, the last record taken by the slowest partition group of any
  source feeding it. Behind a backlog the groups drift apart: a source
  subtask held back by its downstream takes as much as the others whatever
  its partitions, so those with more partitions each fall behind
  (docs/calibration-status.md, session 28). The job's out-of-orderness bound
  (1 s by default) is not added. Records that retention deleted never reach a
  sink: they are lost load, not latency.

With fog nodes (`sim.network`), the backend sets each operator's ND_max and the
capacity it costs (Gesscale eq. 1, in subtasks' worth); a subtask's capacity is
then the cost model's times the fraction the network leaves (`set_network`).

Every step writes one row of `row_width` floats (job columns, then `OP_COLS`
per operator) into a growing array; `harness.backends.sim.readout` turns rows into
snapshots and the run's timeseries.
"""

from __future__ import annotations

import math
import struct
from array import array
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from harness.backends.sim.config import SimConfig
from harness.backends.sim.costs import RunCosts, run_costs
from harness.backends.sim.kafka import FifoTopic, regroup
from harness.kafka_settings import KafkaSettings
from harness.metrics.latency import E2E_BUCKETS_S
from harness.topology import OperatorSpec, Topology, fed_by_several_channels, input_spread

RECOST_EVERY_S = 5.0  # state-dependent and warming capacities are recomputed this often
WARM = 0.999  # a warm-up fraction above this counts as warm (no more recomputing)

# Nexmark generator proportions per 50 events (WORKLOADS-AND-QUERIES.md).
NEXMARK_SHARES: dict[str, float] = {"persons": 1 / 50, "auctions": 3 / 50, "bids": 46 / 50}

# Job columns of a row (amounts per step, not per second). Latencies in seconds; J_LATENCY(_MAX): time in
# Kafka (see the module docstring); E2E: NaN max when no record reached a sink in the step, E2E_SUM the sum
# of the sink records' ages. J_EXPIRED: cumulative records deleted by retention; J_TMS: task managers
# registered (a scale-up's new ones count from their registration).
(J_ARRIVED, J_TAKEN, J_LAG, J_LATENCY, J_LATENCY_MAX, J_PROCESSING, J_PRODUCED, J_PROCESSED,
 J_E2E_COUNT, J_E2E_SUM, J_E2E_MAX, J_EXPIRED, J_TMS) = range(13)
JOB_COLS = 13
# Sink records per end-to-end latency bucket and step: one column per bound of
# `harness.metrics.latency.E2E_BUCKETS_S`, plus the open bucket above the last bound.
E2E_BUCKETS = len(E2E_BUCKETS_S) + 1
_E2E_BOUNDS = [float(b) for b in E2E_BUCKETS_S]
# Per-operator columns, at offset JOB_COLS + i * OP_COLS. *_LANE0: a source's first partition
# group alone (its other group is the total minus these). O_CAP: one subtask's capacity (records/s),
# the cost model's (CPU, state) times the network factor; O_RECLAG: sources, mean over subtasks of the
# age of the last record each emitted (s; NaN until one emitted since the last restart), the event-time
# lag gauge the local stack reads. O_NET: the fraction of its subtasks' capacity the network leaves
# (1 without a network model); O_NDMAX: its ND_max in ms. O_BUSY_F: the mean over its subtasks of the busy
# fraction each has when the operator runs at O_CAP per subtask (1 unless a warming subtask caps the others:
# then a warm one is busy for O_CAP / its own capacity of each second and waits for input the rest).
(O_PAR, O_SHARE, O_IN, O_OUT, O_BLOCKED, O_BUFFER, O_STATE, O_LAG, O_ARRIVED,
 O_IN_LANE0, O_BLOCKED_LANE0, O_LAG_LANE0, O_CAP, O_RECLAG, O_NET, O_NDMAX, O_BUSY_F) = range(17)
OP_COLS = 17

# An operator keeps at least this many subtasks' worth of capacity however far apart its nodes are.
MIN_NETWORK_CAPACITY_SUBTASKS = 0.25


def topic_shares(topology: Topology) -> dict[str, float]:
    """Fraction of the pattern's rate that lands in each topic the job reads.

    As the local generator does (thesis ch. 6.2: no data is generated for a stream the query does
    not use), the pattern's rate is the records produced into the query's topics, split in the
    Nexmark proportions among them: a bids-only query gets the whole rate, q3 / q8 split it 1:3
    between persons and auctions.
    """
    topics = topology.topics
    weights = {t: NEXMARK_SHARES.get(t, 1.0 / max(1, len(topics))) for t in topics}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()} if total > 0 else {}


def expected_per_step(step_rates: np.ndarray, pattern_step_s: float, n_steps: int, dt: float) -> np.ndarray:
    """Records the pattern asks for in each model step (exact integral of the piecewise-constant rate)."""
    rates = np.asarray(step_rates, dtype=float)
    edges = np.arange(len(rates) + 1) * pattern_step_s
    cum = np.concatenate([[0.0], np.cumsum(rates * pattern_step_s)])
    t = np.arange(n_steps + 1) * dt
    return np.diff(np.interp(t, edges, cum))


def subtask_units(spec: OperatorSpec, partitions: int) -> int | None:
    """Whole units spread over subtasks: Kafka partitions (sources), key groups (stateful), else none."""
    if spec.is_source:
        return partitions
    if spec.keyed:
        return spec.max_parallelism
    return None


def unit_shares(parallelism: int, units: int | None) -> tuple[float, ...]:
    """Fraction of an operator's input each subtask gets (whole units, balanced as Flink does)."""
    p = max(1, parallelism)
    if units is None:
        return (1.0 / p,) * p
    base, extra = divmod(units, p)
    return tuple((base + (1 if k < extra else 0)) / units for k in range(p))


def unit_groups(parallelism: int, units: int) -> tuple[tuple[int, int], ...]:
    """(subtasks, units per subtask) of each group of equally loaded subtasks, busiest first."""
    p = max(1, parallelism)
    base, extra = divmod(units, p)
    groups = ((extra, base + 1), (p - extra, base))
    return tuple(g for g in groups if g[0] > 0)


def effective_subtasks(parallelism: int, units: int | None) -> float:
    """Capacity multiplier: the busiest subtask saturates first (see module docstring)."""
    p = max(1, parallelism)
    if units is None:
        return float(p)
    return units / math.ceil(units / p)


@dataclass(frozen=True)
class StepTotals:
    """Cumulative counters (records), for conservation checks."""

    produced: float
    processed: float
    lag: float


class SimModel:
    """Kafka + one Flink job; `step()` advances one `cfg.step_s`."""

    def __init__(
        self,
        topology: Topology,
        arrivals: Mapping[str, np.ndarray],
        cfg: SimConfig,
        parallelism: Mapping[str, int],
        cpu_share: Mapping[str, float] | None = None,
        *,
        costs: RunCosts | None = None,
        partitions: int | None = None,
        kafka: KafkaSettings | None = None,
    ) -> None:
        """`arrivals[source_name]` = records arriving per step into that source's topic.

        `costs` default to the query's profile at `cfg.taskmanager_cpu` (1 CPU when unset);
        `partitions` to the topology's; `kafka` to no retention.
        """
        self.topology = topology
        self.cfg = cfg
        self.dt = float(cfg.step_s)
        self.costs = costs or run_costs(topology, cfg, cfg.taskmanager_cpu or 1.0)
        self.partitions = int(partitions or topology.partitions)
        kafka = kafka or KafkaSettings()
        self.retention_s = kafka.retention_s
        self.segment_s = kafka.segment_s
        self.check_every = max(1, int(round(kafka.retention_check_s / self.dt)))
        self.expired = 0.0
        ops = topology.operators
        self.n = len(ops)
        index = {o.name: i for i, o in enumerate(ops)}
        self.names = tuple(o.name for o in ops)
        self.is_src = [o.is_source for o in ops]
        self.sel = [float(c.selectivity) for c in self.costs.ops]
        self.cap_sub = [0.0] * self.n  # records/s of one subtask now (share, state), before the network loss
        self.busy_f = [1.0] * self.n  # see O_BUSY_F
        self.recost_every = max(1, int(round(RECOST_EVERY_S / self.dt)))
        self.units = [subtask_units(o, self.partitions) for o in ops]
        self.down = [tuple(index[d] for d in topology.downstream(o.name)) for o in ops]
        self.is_sink = [not d for d in self.down]
        # Non-sources: the input buffer's records with the event-time step they carry (shifted one step
        # per hop, see the module docstring); holds the same amount as `buf`.
        self.inbox: list[FifoTopic | None] = [None if o.is_source else FifoTopic() for o in ops]
        self.ups = [tuple(index[u] for u in o.upstream) for o in ops]
        self.multi = [len(u) > 1 for u in self.ups]
        # Sources: one FIFO per group of equally loaded subtasks (see module docstring).
        self.lanes: list[list[FifoTopic]] = [[FifoTopic()] if o.is_source else [] for o in ops]
        self.lane_n: list[tuple[int, ...]] = [()] * self.n  # subtasks per group
        self.lane_w: list[tuple[float, ...]] = [()] * self.n  # input fraction per group
        self.lane_cap: list[tuple[float, ...]] = [()] * self.n  # records per step per group
        self.lane_groups: list[tuple[tuple[int, int], ...]] = [()] * self.n  # (subtasks, units) per group
        self.lane_age: list[list[float]] = [[math.nan] for _ in ops]  # age (steps) of each group's last record
        self.arrivals = [
            (i, [float(v) for v in np.asarray(arrivals.get(o.name, ()), dtype=float)])
            for i, o in enumerate(ops)
            if o.is_source
        ]
        self.bpr = [float(c.state_bytes_per_record) for c in self.costs.ops]
        self.ring: list[list[float] | None] = [
            [0.0] * max(1, math.ceil(o.state_ttl_s / self.dt)) if o.state_ttl_s is not None and self.bpr[i] else None
            for i, o in enumerate(ops)
        ]
        self.ring_pos = [0] * self.n
        self.state = [0.0] * self.n
        self.buf = [0.0] * self.n
        self.par = [max(1, int(parallelism.get(nm, 1))) for nm in self.names]
        self.warmup = self.costs.warmup
        self.born = [[0.0] * p for p in self.par]  # per subtask: when its task manager began processing
        self.warming = self.warmup is not None  # some subtask is still below `WARM`
        share = cpu_share or {}
        self.share = [float(share.get(nm, 1.0)) for nm in self.names]
        # network model (harness.backends.sim.network): capacity lost, in subtasks' worth, and ND_max
        self.net_loss = [0.0] * self.n
        self.nd_ms = [0.0] * self.n
        self.net = [1.0] * self.n  # fraction of each subtask's capacity left after the loss
        self.eff = [1.0] * self.n  # subtasks' worth of capacity the partitions let the operator use
        self.network = cfg.network is not None  # ND_max is reported only where nodes are modelled
        # the network's loss as CPU time (True) or as waiting that burns none (False): readout's CPU gauge
        self.net_loss_burns_cpu = cfg.network is None or cfg.network.loss_burns_cpu
        self.cap = [0.0] * self.n  # records per step, whole operator
        self.bufq = [0.0] * self.n  # queued part of the input buffer (records)
        self.shares: list[tuple[float, ...]] = [()] * self.n
        self.share_kinds: list[tuple[tuple[float, int], ...]] = [()] * self.n  # (share, subtasks)
        self.k = 0  # steps done
        self._configure()
        self.tms: int | None = None  # registered task managers when they differ from the parallelism (rescales)
        self.down_until = 0.0  # seconds: processing resumes at this time
        self.deployment = 0  # restarts of the job so far (each draws the readings' held errors again)
        self.restart_steps = [0]  # step at which each deployment began (its tasks' gauges start afresh)
        self.reclag: list[float] = [math.nan] * self.n  # per source: see O_RECLAG
        self.produced = 0.0
        self.processed = 0.0
        self.row_width = JOB_COLS + OP_COLS * self.n
        longest = max((len(a) for _, a in self.arrivals), default=0)
        # Rows live in flat C-double buffers that the step packs its Python floats into (`struct`: a fifth
        # of numpy's per-element conversion of a list); `_rows` / `_e2e` are numpy views of them.
        self._pack_row = struct.Struct(f"{self.row_width}d").pack_into
        self._alloc_rows(max(64, longest + 1))
        self._order = tuple(reversed(range(self.n)))
        self.src_index = tuple(i for i in range(self.n) if self.is_src[i])
        # event-time windows: (source, hops from it) per source whose partitions hold their watermark back
        self.wm_from: list[tuple[tuple[int, int], ...]] = [
            tuple((index[a], topology.hops(a, o.name)) for a in sorted(topology.ancestors(o.name))
                  if topology.op(a).is_source) if o.fires_on_watermark else ()
            for o in ops]
        self._state_dependent = self.costs.state_dependent

    def _watermark(self, i: int) -> float | None:
        """The event-time step operator i's watermark stands at, in the steps its input carries (one per hop): the
        slowest partition group's last record over every source feeding it, as Flink's watermark is the minimum
        over its input channels and each source subtask's the minimum over its partitions. A group without
        partitions (more source subtasks than partitions) counts no more than Flink's idle readers do. None where it
        is no event-time window, or before every group has emitted (no watermark yet: a window's records keep their
        own event time). The job's out-of-orderness bound (1 s by default) is not added."""
        marks = [q.last_step + hops for src, hops in self.wm_from[i]
                 for q, w in zip(self.lanes[src], self.lane_w[src], strict=True) if w > 0.0]
        if not marks or min(marks) < 0.0:
            return None
        return min(marks)

    def _alloc_rows(self, capacity: int) -> None:
        """Room for `capacity` steps, keeping the rows recorded so far (earlier views keep the old buffers)."""
        rows = array("d", bytes(8 * capacity * self.row_width))
        e2e = array("d", bytes(8 * capacity * E2E_BUCKETS))
        if hasattr(self, "_rows_buf"):
            old_rows: array[float] = self._rows_buf
            old_e2e: array[float] = self._e2e_buf
            rows[: len(old_rows)] = old_rows
            e2e[: len(old_e2e)] = old_e2e
        self._rows_buf: array[float] = rows
        self._e2e_buf: array[float] = e2e
        self._rows = np.frombuffer(rows).reshape(capacity, self.row_width)
        self._e2e = np.frombuffer(e2e).reshape(capacity, E2E_BUCKETS)

    # ------------------------------------------------------------------ config

    def _capacities(self) -> bool:
        """One subtask's records/s from its CPU, state and warm-up; True when any changed."""
        changed = False
        cores = self.costs.tm_cores
        warming = False
        for i, c in enumerate(self.costs.ops):
            cap = c.capacity(self.share[i] * cores, self.state[i] / self.par[i] if self.state[i] else 0.0)
            if c.fed_scaled_out != 1.0 and self._fed_by_several_channels(i):
                cap *= c.fed_scaled_out  # as measured in the operator's bottleneck phase (calibrated_profile)
            busy_f = 1.0
            if self.warmup is not None:
                f, busy_f = self._warm_fraction(i, self.share[i] * cores)
                warming = warming or f < WARM
                cap *= f
            if cap != self.cap_sub[i] or busy_f != self.busy_f[i]:
                self.cap_sub[i] = cap
                self.busy_f[i] = busy_f
                changed = True
        self.warming = warming
        return changed

    def _warm_fraction(self, i: int, cores: float) -> tuple[float, float]:
        """Operator i's warm-up fraction until the next recomputation: its subtasks' mean, or, where its slowest
        subtask caps it (`_capped_by_slowest`), that subtask's; and O_BUSY_F, the mean of slowest / own fraction
        over its subtasks (the warm ones wait for input while the slowest is busy)."""
        born = self.born[i]
        each = self._subtask_fractions(born, cores)
        if not self._capped_by_slowest(i):
            return sum(each) / len(each), 1.0
        slowest = min(each)  # the youngest task manager's
        if min(born) == max(born):
            return slowest, 1.0
        return slowest, sum(slowest / f if f > 0.0 else 1.0 for f in each) / len(each)  # dead time: none takes any

    def _subtask_fractions(self, born: list[float], cores: float) -> list[float]:
        """Each subtask's warm-up fraction until the next recomputation (CPU time had = time since its task
        manager began processing x cores; the curve's exact mean over the interval); task managers started
        together share a birth time, so the curve runs once per run of them."""
        w = self.warmup
        assert w is not None
        now, ahead = self.now, self.recost_every * self.dt
        out: list[float] = []
        last_b, f = math.nan, 0.0
        for b in born:
            if b != last_b:
                last_b, f = b, w.mean_fraction((now - b) * cores, (now + ahead - b) * cores)
            out.append(f)
        return out

    def _capped_by_slowest(self, i: int) -> bool:
        """Whether operator i's slowest subtask caps all of it: its input is spread over its subtasks by key or
        round-robin (an upstream at another parallelism: Flink's rebalance), and a sender blocks as soon as one
        channel runs out of credit. A forward connection (same parallelism, not keyed) pairs the subtasks one to
        one, and a source's partitions are independent: those run at their subtasks' mean."""
        if self.is_src[i]:
            return False
        return input_spread(self.units[i] is not None, self.par[i], (self.par[u] for u in self.ups[i]))

    def _fed_by_several_channels(self, i: int) -> bool:
        """`harness.topology.fed_by_several_channels` for operator i now."""
        if self.is_src[i]:
            return False
        return fed_by_several_channels(self.units[i] is not None, self.par[i], [self.par[u] for u in self.ups[i]])

    def _configure(self) -> None:
        """The layout after a change of parallelism, partitions or network loss, then the capacities."""
        self.version = getattr(self, "version", 0) + 1  # readers cache per-configuration structures on it
        self._capacities()
        for i in range(self.n):
            eff = effective_subtasks(self.par[i], self.units[i])
            self.eff[i] = eff
            loss = self.net_loss[i]
            self.net[i] = max(MIN_NETWORK_CAPACITY_SUBTASKS / eff, 1.0 - loss / eff) if loss > 0 else 1.0
            if self.is_src[i]:
                units = self.units[i] or 1
                groups = unit_groups(self.par[i], units)
                weights = tuple(n * u / units for n, u in groups)
                if weights != self.lane_w[i]:
                    self.lanes[i] = regroup(self.lanes[i], list(weights))
                    self.lane_age[i] = [math.nan] * len(weights)
                self.lane_groups[i] = tuple(groups)
                self.lane_n[i] = tuple(n for n, _ in groups)
                self.lane_w[i] = weights
            self.shares[i] = unit_shares(self.par[i], self.units[i])
            kinds: dict[float, int] = {}
            for sh in self.shares[i]:
                kinds[sh] = kinds.get(sh, 0) + 1
            self.share_kinds[i] = tuple(kinds.items())
        self._apply_capacities()

    def _apply_capacities(self) -> None:
        """Per-step capacities from `cap_sub` and the layout; all a change of capacity alone needs (warm-up,
        state) - the layout and the readers' caches on `version` stay."""
        for i in range(self.n):
            sub_per_s = self.cap_sub[i] * self.net[i]  # the cost model's capacity, less the network's loss
            if self.is_src[i]:
                # a group of subtasks without partitions takes nothing
                self.lane_cap[i] = tuple(n * sub_per_s * self.dt if u > 0 else 0.0 for n, u in self.lane_groups[i])
            per_s = sub_per_s * self.eff[i]
            self.cap[i] = per_s * self.dt
            self.bufq[i] = per_s * self.cfg.buffer_s

    def reconfigure(self, parallelism: Mapping[str, int], cpu_share: Mapping[str, float] | None,
                    resumes_at: float | None = None) -> None:
        """Apply a new configuration (buffers, state and Kafka queues are kept); added subtasks run on fresh
        task managers that begin processing at `resumes_at` (default now), a scale-down keeps the oldest."""
        for i, nm in enumerate(self.names):
            if nm in parallelism:
                p = max(1, int(parallelism[nm]))
                born = self.born[i]
                if p > len(born):
                    t = self.now if resumes_at is None else resumes_at
                    born.extend([t] * (p - len(born)))
                    self.warming = self.warmup is not None
                else:
                    born.sort()
                    del born[p:]
                self.par[i] = p
            if cpu_share and nm in cpu_share:
                self.share[i] = float(cpu_share[nm])
        self._configure()

    def set_network(self, nd_ms: Mapping[str, float], loss_subtasks: Mapping[str, float]) -> None:
        """ND_max (ms) and the capacity it costs (subtasks' worth, gamma ND_max / alpha) per operator."""
        for i, nm in enumerate(self.names):
            self.nd_ms[i] = float(nd_ms.get(nm, 0.0))
            self.net_loss[i] = max(0.0, float(loss_subtasks.get(nm, 0.0)))
        self._configure()

    def subtask_capacity(self, i: int) -> float:
        """Records/s one subtask of operator i processes now (cost model's CPU and state, network loss)."""
        return self.cap_sub[i] * self.net[i]

    def restart_meters(self) -> None:
        """A restart resets the sources' event-time lag gauges (NaN until they emit again) and begins a new
        deployment: the readings' held errors are drawn again (harness.backends.sim.readout)."""
        self.lane_age = [[math.nan] * len(lanes) if lanes else [math.nan] for lanes in self.lanes]
        self.begin_deployment()

    def begin_deployment(self) -> None:
        """The job restarted (a rescale, a recovery): the readings' held errors are drawn again, and its tasks'
        busy/idle/backpressured gauges begin a new window (harness.backends.sim.readout)."""
        self.deployment += 1
        self.restart_steps.append(self.k)

    def stop_for(self, downtime_s: float) -> None:
        """No processing from now for `downtime_s` seconds (extends a running downtime)."""
        self.down_until = max(self.down_until, self.now + max(0.0, downtime_s))

    @property
    def now(self) -> float:
        return self.k * self.dt

    @property
    def parallelism(self) -> dict[str, int]:
        return dict(zip(self.names, self.par, strict=True))

    @property
    def cpu_share(self) -> dict[str, float]:
        return dict(zip(self.names, self.share, strict=True))

    @property
    def state_bytes(self) -> float:
        return float(sum(self.state))

    @property
    def lag(self) -> float:
        return float(sum(q.pending for lanes in self.lanes for q in lanes))

    def totals(self) -> StepTotals:
        return StepTotals(self.produced, self.processed, self.lag)

    # ------------------------------------------------------------------ step

    def step(self) -> None:
        k = self.k
        dt = self.dt
        t0 = k * dt
        if self.down_until <= t0:
            f = 1.0
        elif self.down_until >= t0 + dt:
            f = 0.0
        else:
            f = (t0 + dt - self.down_until) / dt
        n = self.n
        lanes = self.lanes
        is_src = self.is_src
        buf = self.buf
        cap = self.cap
        sel = self.sel
        if (self.state_dependent or self.warming) and k % self.recost_every == 0 and self._capacities():
            self._apply_capacities()
        if self.retention_s is not None and k % self.check_every == 0:
            self._expire(t0)
        arrived = [0.0] * n
        arrived_total = 0.0
        for i, arr in self.arrivals:
            a = arr[k] if k < len(arr) else 0.0
            if a > 0.0:
                for q, w in zip(lanes[i], self.lane_w[i], strict=True):
                    q.produce(k, a * w)
                arrived[i] = a
                arrived_total += a
        self.produced += arrived_total

        want = [0.0] * n
        lane_want: list[list[float]] = [[]] * n
        for i in range(n):
            if is_src[i]:
                lw = []
                for q, c in zip(lanes[i], self.lane_cap[i], strict=True):
                    c *= f
                    lw.append(c if c < q.pending else q.pending)
                lane_want[i] = lw
                want[i] = sum(lw)
            else:
                c = cap[i] * f
                want[i] = c if c < buf[i] else buf[i]

        free = [0.0] * n
        x = [0.0] * n
        blocked = [0.0] * n
        usage = [0.0] * n
        lane0_in = [0.0] * n
        lane0_blocked = [0.0] * n
        taken_total = 0.0
        age_sum = 0.0
        max_age = 0.0
        down = self.down
        multi = self.multi
        ups = self.ups
        bufq = self.bufq
        bpr, rings, ring_pos, state = self.bpr, self.ring, self.ring_pos, self.state
        inbox = self.inbox
        is_sink = self.is_sink
        wm_from = self.wm_from
        e2e_hist: list[tuple[int, float]] = []  # (bucket, records) of the records the sinks took
        e2e_count = e2e_sum = 0.0
        e2e_max = -1.0
        for i in self._order:
            xi = want[i]
            si = sel[i]
            pieces: list[tuple[float, float]] = []
            if si > 0.0 and xi > 0.0:
                for j in down[i]:
                    room = free[j]
                    if multi[j]:  # siblings share j's free space in proportion to what they offer
                        demand = sum(sel[u] * want[u] for u in ups[j])
                        room = room * (si * want[i] / demand) if demand > 0.0 else 0.0
                    if si * xi > room:
                        xi = room / si if room > 0.0 else 0.0
            if is_src[i]:
                if xi > 0.0:
                    # output blocked: every partition group slows down in proportion
                    ratio = xi / want[i]
                    xi = 0.0
                    lin, lblk = lane0_in, lane0_blocked
                    for g, q in enumerate(lanes[i]):
                        wg = lane_want[i][g]
                        if wg <= 0.0:
                            continue
                        got, a_sum, a_max = q.consume(k, wg * ratio, pieces)
                        if got > 0.0:
                            self.lane_age[i][g] = k - q.last_step
                        xi += got
                        age_sum += a_sum
                        if a_max > max_age:
                            max_age = a_max
                        if g == 0:
                            lin[i], lblk[i] = got, wg - got
                    taken_total += xi
                else:
                    lane0_blocked[i] = lane_want[i][0] if lane_want[i] else 0.0
            else:
                b = buf[i] - xi
                buf[i] = b if b > 0.0 else 0.0
                if xi > 0.0:
                    inbox[i].consume(k, xi, pieces)  # type: ignore[union-attr]
                    if is_sink[i]:
                        for origin, c in pieces:
                            age = (k - origin) * dt
                            e2e_hist.append((bisect_left(_E2E_BOUNDS, age), c))
                            e2e_count += c
                            e2e_sum += c * age
                            if age > e2e_max:
                                e2e_max = age
                usage[i] = buf[i] / bufq[i] if bufq[i] > 0.0 else 0.0
                # in-flight (one step of capacity) + queued part
                free[i] = cap[i] + bufq[i] - buf[i]
            x[i] = xi
            blocked[i] = want[i] - xi
            if si > 0.0 and xi > 0.0:
                out = si * xi
                if wm_from[i]:  # an event-time window emits once the watermark passes: at about its event time
                    mark = self._watermark(i)
                    if mark is not None:
                        pieces = [(o if o < mark else mark, c) for o, c in pieces]
                for j in down[i]:
                    buf[j] += out
                    q_j = inbox[j]
                    qb = q_j.buckets  # type: ignore[union-attr]
                    added = 0.0
                    for origin, c in pieces:  # FifoTopic.append, inlined: the step is the hot loop
                        origin += 1.0
                        c *= si
                        if qb and qb[-1][0] == origin:
                            qb[-1][1] += c
                        else:
                            qb.append([origin, c])
                        added += c
                    q_j.pending += added  # type: ignore[union-attr]
            if bpr[i]:
                add = xi * bpr[i]
                ring = rings[i]
                if ring is not None:
                    pos = ring_pos[i]
                    state[i] += add - ring[pos]
                    ring[pos] = add
                    ring_pos[i] = pos + 1 if pos + 1 < len(ring) else 0
                else:
                    state[i] += add
        self.processed += taken_total

        lag = 0.0
        heads = []
        for i in self.src_index:
            for q in lanes[i]:
                lag += q.pending
                if q.buckets:
                    heads.append(q.buckets[0][0])
        if taken_total > 0.0:
            latency = age_sum / taken_total * dt
            latency_max = max_age * dt
        else:  # nothing emitted: the oldest pending record has waited this long already
            latency = latency_max = (k - min(heads)) * dt if heads else 0.0
        par = self.par
        tms = self.tms if self.tms is not None else sum(par)
        row: list[float] = [arrived_total, taken_total, lag, latency, latency_max, f, self.produced, self.processed,
                            e2e_count, e2e_sum, e2e_max if e2e_count > 0.0 else math.nan, self.expired, tms]
        share = self.share
        cap_sub = self.cap_sub
        net = self.net
        reclag = self.reclag
        busy_f = self.busy_f
        for i in range(n):
            if is_src[i]:
                src_lag = 0.0
                gauge = 0.0
                known = 0
                for q, cnt, age in zip(lanes[i], self.lane_n[i], self.lane_age[i], strict=True):
                    src_lag += q.pending
                    if age == age:  # not NaN: this group emitted since the last restart
                        gauge += age * cnt
                        known += cnt
                lag0 = lanes[i][0].pending
                # subtasks that did not emit since a restart report NaN and drop out of the average
                reclag[i] = gauge / known * dt if known else math.nan
            else:
                src_lag = lag0 = 0.0
            row += (
                par[i],
                share[i],
                x[i],
                sel[i] * x[i],
                blocked[i],
                usage[i],
                state[i],
                src_lag,
                arrived[i],
                lane0_in[i],
                lane0_blocked[i],
                lag0,
                cap_sub[i] * net[i],
                reclag[i],
                net[i],
                self.nd_ms[i],
                busy_f[i],
            )
        if k >= len(self._rows):
            self._alloc_rows(2 * len(self._rows))
        self._pack_row(self._rows_buf, 8 * k * self.row_width, *row)
        if e2e_hist:
            hist = self._e2e_buf
            at = k * E2E_BUCKETS
            for b_i, c in e2e_hist:
                hist[at + b_i] += c
        self.k = k + 1

    def _expire(self, t0: float) -> None:
        """Retention: delete closed segments whose newest record is older than the retention time."""
        assert self.retention_s is not None
        cutoff = t0 - self.retention_s
        if cutoff <= 0.0:
            return
        seg = self.segment_s
        before_step = math.floor(cutoff / seg) * seg / self.dt  # first step of the newest deletable segment + 1
        for i in self.src_index:
            for q in self.lanes[i]:
                if q.buckets and q.buckets[0][0] < before_step:
                    self.expired += q.expire(before_step)

    @property
    def state_dependent(self) -> bool:
        return self._state_dependent

    def run_until(self, t: float) -> None:
        """Step while the next step ends at or before `t`."""
        limit = t + 1e-9 * max(1.0, abs(t))
        while (self.k + 1) * self.dt <= limit:
            self.step()

    def rows_array(self, last: int | None = None) -> np.ndarray:
        """Recorded rows as a (steps, row_width) view; `last` keeps only the newest ones."""
        lo = 0 if last is None else max(0, self.k - last)
        return self._rows[lo : self.k]

    def e2e_array(self, last: int | None = None) -> np.ndarray:
        """Sink records per end-to-end latency bucket, one row per step, aligned with `rows_array`."""
        lo = 0 if last is None else max(0, self.k - last)
        return self._e2e[lo : self.k]

    def op_col(self, i: int, col: int) -> int:
        return JOB_COLS + i * OP_COLS + col

