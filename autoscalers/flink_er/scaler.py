"""Flink-ER: elastic rescheduling from an instance-level flow network.

Source: "Flink-ER: An Elastic Resource-Scheduling Strategy for Processing Fluctuating
Mobile Stream Data on Flink" (`flink-er-elastic-resource-scheduling.txt`), sec. 2.2-2.3
(flow network, partitions), sec. 3.1 (Alg. 1, capacity detection with latency
feedback), sec. 3.2 (Alg. 2, elastic resource reallocation), sec. 3.4 (eq. 14, eta).

Every `period_s` (60 s):

1. Source: the source subtask whose Kafka partitions hold the largest lag (the
   subtask's own lag when the snapshot has it, else its operator's lag spread evenly).
   If that lag is below phi nothing happens (Alg. 2, `Max(lags[]) >= phi`).
2. Flow network (sec. 2.2): the subtasks of that source's operator and of every operator
   downstream of it are vertices; a super-source feeds the source subtasks and the sink
   subtasks drain into a super-sink. The capacity of an edge (v_i, v_j) is v_j's
   processing capability divided over its input links (eq. 10's structure), with the
   capability measured rather than derived from bandwidth: the subtask's true processing
   rate records-in / busy fraction (busy floored at `busy_floor`), times the operator's
   latency-feedback factor, minus what v_j receives from operators outside the network
   (e.g. the other input of a join). Flows are the measured rates: v_i's output spread
   evenly over its links (records-in for the super-source edges).
3. Max-flow / min-cut (networkx, preflow-push; equivalent to the paper's Ford-Fulkerson
   with BFS augmenting paths): the minimum partition D = (X, Y) is the bottleneck when
   its measured flow f(X, Y) >= lambda c(X, Y) (eq. 11, lambda = 0.85). Alg. 2 enlarges
   "each operator that meets the criterion of equation (11)": every partition meeting it is
   a bottleneck (sec. 3.2), so the first operator of Y of the minimum cut and of every
   operator's front cut that meets eq. (11) gets one more subtask (`enlarge: each`; `first`
   keeps only the minimum cut's operator). Flink cannot re-route
   accumulated data along an augmenting path as Flink-ER's modified runtime does, so
   that branch of Alg. 2 is only reported (`max_flow` vs `flow` in the details).
4. Latency feedback (Alg. 1, eq. 14): per operator a capacity factor. When the job's
   latency exceeds the constraint lc and the operator's flow is within its capacity, the
   capacity was over-estimated: lower it; when latency is far below lc (< `latency_low`
   x lc) and the flow is close to capacity (>= lambda c), raise it. The paper measures
   latency per vertex (eq. 12); Flink exposes the job's latency, so a capacity is lowered
   only at the vertices where tuples wait (input buffers >= `queue_threshold` full;
   sources: lag growing while not backpressured). Lowering every vertex on a job-level
   signal would shrink all capacities to their flows and make the vertex with the
   smallest rate (usually the sink) look like the bottleneck. Eq. 14's step
   eta = |1000 / l - 1000 / lc| is in the units of eq. 13's capacity 1000 / l; relative to
   that capacity it is |1 - l / lc|, which we apply multiplicatively (capped at `eta_max`,
   or a fixed `eta`), since our capacities are measured rates, not 1000 / l. The job's
   latency is the snapshot's (event-time lag at the sources); the paper tracks
   per-vertex latency, which Flink does not expose cheaply.

lc, the latency constraint, is the experiment's latency SLO (`slo.latency_s`, via `RunContext`).

phi (the paper gives no value): `phi_s` = 30 s of the lagging subtask's input rate, so
the threshold scales with the load (a fixed record count would mean very different
delays at 1/100 and at full scale). 30 s is where the Flink operator autoscaler also
starts treating a source as catching up (observed-true-processing-rate.lag-threshold),
and a backlog smaller than that drains within one 60 s period if any headroom exists.
`phi_records` sets an absolute threshold instead.

While the job restarts after a rescale (and until a metrics window no longer overlaps
the downtime) Flink-ER waits: zero rates there are not capacities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx

from autoscalers.base import AppliedAction, Autoscaler, AutoscalerConfig, History, RunContext, ScalingDecision
from autoscalers.flink_er.config import FlinkERConfig
from autoscalers.restarts import window_overlaps_restart
from harness.metrics.snapshot import MetricsSnapshot, Needs, OperatorMetrics, needs
from harness.topology import Topology
from harness.vocabulary import Metric

SUPER_SOURCE = "S"
SUPER_SINK = "T"


@dataclass(frozen=True)
class Instance:
    """Measured rates of one subtask."""

    op: str
    index: int
    rin: float
    rout: float
    busy: float  # fraction
    lag: float


def instances(name: str, m: OperatorMetrics) -> list[Instance]:
    """Per-subtask rates; an even split when the snapshot has no per-subtask values."""
    p = max(1, m.parallelism)
    op_lag = m.lag or 0.0
    if len(m.subtasks) == p:
        return [
            Instance(name, i, s.records_in_per_s, s.records_out_per_s, s.busy_ms_per_s / 1000.0,
                     s.lag if s.lag is not None else op_lag / p)
            for i, s in enumerate(m.subtasks)
        ]  # fmt: skip
    return [
        Instance(name, i, m.records_in_per_s / p, m.records_out_per_s / p, m.busy_fraction, op_lag / p)
        for i in range(p)
    ]


@dataclass
class FlowNetwork:
    """The instance-level flow network rooted at the most lagging source (sec. 2.2)."""

    graph: nx.DiGraph
    operators: tuple[str, ...]  # in topological order
    capacity: dict[str, float]  # per operator, after feedback and outside inflow

    @staticmethod
    def vertex(inst: Instance) -> str:
        return f"{inst.op}#{inst.index}"


@dataclass(frozen=True)
class Cut:
    capacity: float  # = the max flow (max-flow min-cut theorem)
    flow: float  # measured flow across the cut
    first_operator: str | None  # first operator of Y in topological order


class FlinkER(Autoscaler):
    """Min-cut bottleneck detection on a measured flow network; +1 on the bottleneck."""

    name = "flink-er"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config = FlinkERConfig
    config: FlinkERConfig

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self.capacity_factor: dict[str, float] = {}
        self._last_eval_t: float | None = None
        self._applied: AppliedAction | None = None

    def needs(self) -> Needs:
        feedback = self.config.latency_feedback
        return needs(
            job=(Metric.LATENCY_KAFKA,) if feedback else (),
            operators=(Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BUSY),
            sources=(Metric.LAG, Metric.INPUT_RATE) + ((Metric.LAG_RATE, Metric.BACKPRESSURED) if feedback else ()),
            inner=(Metric.BUFFER_USAGE,) if feedback else (),
        )

    # ------------------------------------------------------------ capacities

    def instance_capacity(self, inst: Instance) -> float:
        """True processing rate of a subtask (records/s) times its operator's feedback factor."""
        if inst.rin <= 0:
            return math.inf  # nothing flows: its capacity is unknown, it cannot be the bottleneck
        return inst.rin / max(inst.busy, self.config.busy_floor) * self.capacity_factor.get(inst.op, 1.0)

    def most_lagging(self, snapshot: MetricsSnapshot) -> tuple[Instance, float] | None:
        """The source subtask with the largest lag and that lag in seconds of its input."""
        best: tuple[Instance, float] | None = None
        for spec in snapshot.topology.sources:
            m = snapshot.operators.get(spec.name)
            if m is None:
                continue
            rate = (m.input_rate if m.input_rate is not None else m.records_in_per_s) / max(1, m.parallelism)
            for inst in instances(spec.name, m):
                secs = inst.lag / rate if rate > 0 else (math.inf if inst.lag > 0 else 0.0)
                if best is None or inst.lag > best[0].lag:
                    best = (inst, secs)
        return best

    def reachable(self, topo: Topology, root: str) -> tuple[str, ...]:
        seen = {root}
        frontier = [root]
        while frontier:
            for d in topo.downstream(frontier.pop()):
                if d not in seen:
                    seen.add(d)
                    frontier.append(d)
        return tuple(n for n in topo.names if n in seen)

    def build(self, snapshot: MetricsSnapshot, root: str) -> FlowNetwork:
        """Vertices, capacities and flows of the network rooted at operator `root`."""
        topo = snapshot.topology
        ops = self.reachable(topo, root)
        inside = set(ops)
        insts = {n: instances(n, snapshot.operators[n]) for n in ops}
        g = nx.DiGraph()
        op_cap: dict[str, float] = {}
        for name in ops:
            ups_in = [u for u in topo.upstream(name) if u in inside]
            ups_out = [u for u in topo.upstream(name) if u not in inside and u in snapshot.operators]
            p = len(insts[name])
            outside = sum(snapshot.operators[u].records_out_per_s for u in ups_out) / p
            in_links = sum(len(insts[u]) for u in ups_in) if ups_in else 1
            total = 0.0
            for inst in insts[name]:
                cap = max(0.0, self.instance_capacity(inst) - outside)
                total += cap
                per_link = cap / in_links
                v = FlowNetwork.vertex(inst)
                if not ups_in:  # the root source: fed by the super-source
                    self._edge(g, SUPER_SOURCE, v, per_link, inst.rin)
                for u in ups_in:
                    for ui in insts[u]:
                        self._edge(g, FlowNetwork.vertex(ui), v, per_link, ui.rout / p)
                if not topo.downstream(name):
                    g.add_edge(v, SUPER_SINK, flow=inst.rout)  # no capacity attribute = unbounded
            op_cap[name] = total
        # Operators whose downstream lies outside the network still drain somewhere.
        for name in ops:
            if topo.downstream(name) and not any(d in inside for d in topo.downstream(name)):
                for inst in insts[name]:
                    g.add_edge(FlowNetwork.vertex(inst), SUPER_SINK, flow=inst.rout)
        return FlowNetwork(graph=g, operators=ops, capacity=op_cap)

    @staticmethod
    def _edge(g: nx.DiGraph, u: str, v: str, capacity: float, flow: float) -> None:
        if math.isinf(capacity):
            g.add_edge(u, v, flow=flow)
        else:
            g.add_edge(u, v, capacity=capacity, flow=flow)

    def min_cut(self, net: FlowNetwork) -> Cut | None:
        """Minimum partition (X, Y) with its capacity and measured flow (sec. 2.3, eqs. 4-5)."""
        g = net.graph
        if SUPER_SOURCE not in g or SUPER_SINK not in g:
            return None
        try:
            cut_value, (x_side, y_side) = nx.minimum_cut(g, SUPER_SOURCE, SUPER_SINK)
        except nx.NetworkXUnbounded:
            return None
        flow = 0.0
        heads: set[str] = set()
        for u, v, data in g.edges(data=True):
            if u in x_side and v in y_side:
                flow += data.get("flow", 0.0)
                heads.add(v)
            elif u in y_side and v in x_side:
                flow -= data.get("flow", 0.0)
        order = {n: i for i, n in enumerate(net.operators)}
        head_ops = {h.split("#", 1)[0] for h in heads if h != SUPER_SINK}
        first = min(head_ops, key=lambda o: order.get(o, math.inf)) if head_ops else None
        return Cut(capacity=float(cut_value), flow=flow, first_operator=first)

    # ------------------------------------------------------------ Alg. 1

    def feedback(self, snapshot: MetricsSnapshot, ops: tuple[str, ...]) -> dict[str, float]:
        """Regulate each operator's capacity factor from the job's latency (Alg. 1, eq. 14)."""
        cfg = self.config
        root_flow = snapshot.operators[ops[0]].records_in_per_s if ops else 0.0
        if not cfg.latency_feedback or root_flow <= 0:  # Alg. 1 regulates only under load (S.f > 0)
            return {}
        latency, lc = snapshot.latency_s, self.context.slo_latency_s
        step = cfg.eta if cfg.eta is not None else min(cfg.eta_max, abs(1.0 - latency / lc))
        changed: dict[str, float] = {}
        for name in ops:
            m = snapshot.operators[name]
            insts = instances(name, m)
            flow = sum(i.rin for i in insts)
            cap = sum(self.instance_capacity(i) for i in insts)
            factor = self.capacity_factor.get(name, 1.0)
            if latency > lc and flow <= cap and self.slow(snapshot.topology, name, m):
                factor *= 1.0 - step
            elif latency < cfg.latency_low * lc and math.isfinite(cap) and flow >= cfg.lam * cap:
                factor *= 1.0 + step
            else:
                continue
            self.capacity_factor[name] = min(20.0, max(0.05, factor))
            changed[name] = self.capacity_factor[name]
        return changed

    def slow(self, topo: Topology, name: str, m: OperatorMetrics) -> bool:
        """Whether tuples wait at this vertex: the stand-in for its own latency (eq. 12).

        Non-sources: full input buffers. Sources: lag growing while not backpressured
        (they cannot keep up by themselves)."""
        cfg = self.config
        if topo.op(name).is_source:
            return (m.lag_rate or 0.0) > 0 and m.backpressured_fraction <= 0.5
        return m.input_buffer_usage >= cfg.queue_threshold

    # ------------------------------------------------------------ Alg. 2

    def n_max(self, topo: Topology, name: str) -> int:
        spec = topo.op(name)
        cap = min(spec.max_parallelism, topo.partitions) if spec.is_source else spec.max_parallelism
        return min(cap, self.config.n_max) if self.config.n_max is not None else cap

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        cfg = self.config
        if self._last_eval_t is not None and snapshot.t - self._last_eval_t < cfg.period_s - 1e-9:
            return None
        if window_overlaps_restart(snapshot, history, self._applied):
            return None  # the job is restarting: its rates say nothing about capacities
        if snapshot.gaps(self.needs()):
            return None  # the flow network spans the job: no min cut over unmeasured rates
        self._last_eval_t = snapshot.t
        lagging = self.most_lagging(snapshot)
        if lagging is None:
            return None
        source, lag_s = lagging
        topo = snapshot.topology
        adjusted = self.feedback(snapshot, self.reachable(topo, source.op))
        over_phi = source.lag >= cfg.phi_records if cfg.phi_records is not None else lag_s >= cfg.phi_s
        if not over_phi:
            return None
        net = self.build(snapshot, source.op)
        cut = self.min_cut(net)
        bottlenecks = self.bottlenecks(net, topo, cut)
        grow = {n: snapshot.operators[n].parallelism + 1 for n in bottlenecks}
        grow = {n: p for n, p in grow.items() if p <= self.n_max(topo, n)}
        if not grow:
            return None
        details: dict[str, Any] = {
            "source_subtask": FlowNetwork.vertex(source),
            "source_lag": source.lag,
            "source_lag_s": lag_s,
            "bottlenecks": {n: {"flow": f, "capacity": c} for n, (f, c) in bottlenecks.items()},
            "lambda": cfg.lam,
            "enlarge": cfg.enlarge,
            "network_flow": sum(i.rin for i in instances(source.op, snapshot.operators[source.op])),
            "operator_capacity": net.capacity,
            "capacity_factor": dict(self.capacity_factor),
            "feedback_adjusted": adjusted,
            "latency_constraint_s": self.context.slo_latency_s,
        }
        if cut is not None:
            details |= {
                "cut_capacity": cut.capacity,
                "max_flow": cut.capacity,
                "cut_flow": cut.flow,
                "utilisation": cut.flow / cut.capacity if cut.capacity > 0 else math.inf,
            }
        parts = [
            f"{n} {p - 1}->{p} (partition before it carries {bottlenecks[n][0]:,.0f} of "
            f"{bottlenecks[n][1]:,.0f} rec/s >= lambda {cfg.lam:g})"
            for n, p in grow.items()
        ]
        reason = f"flink-er: {'; '.join(parts)}; lag {lag_s:,.0f} s at {details['source_subtask']}"
        return ScalingDecision(parallelism=grow, reason=reason, details=details)

    def bottlenecks(self, net: FlowNetwork, topo: Topology, cut: Cut | None) -> dict[str, tuple[float, float]]:
        """Operators first after a partition that meets eq. (11), f(X, Y) >= lambda c(X, Y): (flow, capacity).

        Alg. 2 ends with "enlarge the parallelism of each operator that meets the criterion of
        equation (11)", and sec. 3.2 says why: the minimum partition "might not be the only"
        bottleneck, so every partition whose flow reaches lambda of its capacity is one, and the
        first operator of its Y side gets one more subtask. The partitions considered are the
        minimum cut (it may run through single subtasks) and, with `enlarge: each`, the cut in
        front of every operator of the network (Y = the operator and all it feeds). With
        `enlarge: first` only the minimum cut counts (one operator per period).
        """
        lam = self.config.lam
        out: dict[str, tuple[float, float]] = {}
        if cut is not None and cut.first_operator is not None and cut.flow > 0 and cut.flow >= lam * cut.capacity:
            out[cut.first_operator] = (cut.flow, cut.capacity)
        if self.config.enlarge == "each":
            for name in net.operators:
                capacity, flow = self.front_cut(net, topo, name)
                if name not in out and math.isfinite(capacity) and flow > 0 and flow >= lam * capacity:
                    out[name] = (flow, capacity)
        order = {n: i for i, n in enumerate(net.operators)}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def front_cut(self, net: FlowNetwork, topo: Topology, name: str) -> tuple[float, float]:
        """(capacity, measured flow) of the partition X | Y with Y = `name` and every operator it feeds."""
        y_ops = set(self.reachable(topo, name)) & set(net.operators)
        y_side = {v for v in net.graph if v == SUPER_SINK or v.split("#", 1)[0] in y_ops}
        capacity = flow = 0.0
        for u, v, data in net.graph.edges(data=True):
            if (u in y_side) == (v in y_side):
                continue
            if v in y_side:
                capacity += data.get("capacity", math.inf)
                flow += data.get("flow", 0.0)
            else:
                flow -= data.get("flow", 0.0)
        return capacity, flow

    def on_applied(self, action: AppliedAction) -> None:
        self._applied = action
