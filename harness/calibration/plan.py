"""What `bench calibrate` does for one query, phase by phase, and how long it takes.

One job per query, every operator at parallelism 1 on its own task manager (one slot each, as
in every run), fed by the load generator from a fresh consumer group:

0. `warmup`: the JVMs compile the query's hot code at a full CPU (at a 0.25-CPU quota the JIT takes
   minutes and every rate measured meanwhile is the compiler's), then `probe`: the generator offers
   more than the estimate, the sources' saturated rate is measured (raised and repeated if the
   backlog did not grow), and its backlog is drained.
1. `ladder`: the generator steps through fractions of the measured saturated rate; every
   operator runs unsaturated at several utilisations (CPU per record, readings against the truth,
   meter lag at each step). Then (not with --quick) `spread`: every operator scaled out to 2-3 subtasks
   (`spread_layout`; in place; fresh task managers get their JIT at a full CPU first), the generator stepping
   through fractions of a top rate at which each operator's subtasks run at up to `SPREAD_TOP` of their
   capacity, nothing saturated or held back: the readings of scaled-out subtasks against their truth (q1's
   source at 0.1 CPU reads 0.55-0.64 busy at one subtask whatever its load, its task manager at its full quota;
   0.08-0.14 at two, at 14-41 % of its capacity), then back to parallelism 1.
2. `overload`: the generator offers more than the job can take, so the bottleneck saturates at
   share 1.0 (its capacity) and everything upstream of it is backpressured.
3. `rescale`: at a moderate rate, the query's stateful (else middle) operator goes 1 -> 2 -> 1
   with each method; task-manager start-up is timed before each scale-up, stop after each
   scale-down, and the checkpointed state size recorded with every downtime (a resubmitted job's
   first checkpoint is awaited). Before the first rescale and after each scale-down (the job back
   at parallelism 1, restarted on warm task managers) a `deployment` phase holds the moderate rate:
   one load read by several deployments, whose readings' means differ by the error each keeps.
   Early, while the state is small: with what the later phases add, q3's in-place restarts took
   107-201 s each at 0.25 CPU (125 MB of state).
4. `share`: overloaded again (every task manager briefly at a full CPU first: a rescale may have
   started one), each operator in turn runs at lower CPU shares of its task manager's quota
   (cgroup, no restart), which makes it the bottleneck: its capacity there.
5. `bottleneck` (not with --quick): each operator made the job's only bottleneck at share 1.0 the way
   a run makes it: everything upstream of it scaled out to 2-3 subtasks and the generator offering more
   than it takes. Its capacity where its upstream does not limit it first (q1 at 0.1 CPU: source and map
   both near 44k/s at parallelism 1), its busy reading while its input holds records (the map read 0.10
   busy at parallelism 1 and 0.8-0.98 as the runs' bottleneck), and its upstream's readings at
   parallelism 2-3 while held back by it. The sources last: each reads the backlog the phases before
   left, its downstream scaled out (up to 3 subtasks) to take what it gives, so a source behind a slower
   operator saturates at its full share too; skipped where its downstream could not take even its
   estimated capacity at 3.
6. `parallelism` (--parallelisms beyond 1): the bottleneck at higher parallelism, overloaded:
   how capacity scales with subtasks (Kafka partitions, key groups).
   The layouts of phases 5 and 6 are set by the method phase 3 measured fastest for the query
   (`fastest_relayout`; q3's join at 0.25 CPU, session 24, by its task manager's log: restores of 35 s up and
   68 s down at 44 MB in place, 18 s and 35 s at about 50 MB by savepoint); the spread phase's, before phase 3,
   in place, and any whose method failed on a job still running.
7. `rescale` again where the state has grown (at least doubled, to 20 MB or more): an in-place and a
   savepoint scale-up with the larger state, a second point of each method's downtime against
   state size within the query.
8. `coldstart`: a new job on fresh task managers at their quota, offered more than the warm job's
   measured rate: the job's rate while their JVMs warm up (class loading, the JIT), the curve the
   simulator gives every new task manager; `COLDSTARTS` times (once with --quick), each on fresh task managers,
   since one start says nothing of how far the next one lands from it (q1 at 0.1 CPU, six local starts: 0.40-0.92
   of their own warm rate 20-25 s in). Last, because only now is the warm rate known on this
   machine (planned from an estimate, a cold start on a 3x faster machine was never overloaded).
Durations are seconds of wall time; `--quick` shortens every phase, measures one rescale method
fewer (reactive), one lower CPU share (0.5) and no spread or bottleneck phases, and `time_scale` shrinks
everything further (the integration test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from harness.topology import Topology

LADDER = (0.15, 0.35, 0.55, 0.75)  # fractions of the estimated bottleneck capacity
LADDER_QUICK = (0.2, 0.45, 0.7)
OVERLOAD = 1.6  # offered rate / estimated capacity while saturating
COLD_OVERLOAD = 1.2  # offered / the warm job's measured rate while fresh task managers warm up
PROBE_RAISE = 3.0  # a probe that did not saturate offers this many times more (the estimate may be a guess)
BOTTLENECK_HEADROOM = 1.25  # scaled-out subtasks (a bottleneck's upstream, a source's downstream) carry this many
# times what reaches them in a bottleneck phase
BOTTLENECK_SCALED_MAX = 3  # ... at most this many per operator (task managers on a 2-core host)
SPREAD_SUBTASKS = 2  # every operator's subtasks in the spread phase, at least (8 partitions: a source at 3 gets 3/3/2,
# so its busiest subtask runs at 9/8 of the mean; the fits use the mean per subtask)
SPREAD_SUBTASKS_MAX = 3  # ... and at most (task managers on a 2-core host, as a bottleneck phase's upstream)
SPREAD_TOP = 0.8  # the utilisation of an operator's subtasks at the spread phase's top rate, at most
# fractions of that top rate the spread phase steps through. Session 15's levels were fractions of the rate at one
# subtask, so only the operator that limits there got to half its capacity per subtask (q1's map: 0.11-0.32), while
# the runs' scaled-out operators work at up to 0.9-0.98 (q1's HPA-Varga cell, map at 2 subtasks)
SPREAD = (0.25, 0.5, 0.75, 1.0)
METER_S = 5.0  # Flink's busy / backpressured meters update this often
SHARES = (0.5, 0.25)  # the two lower CPU shares (share 1.0 is the overload phase)
# --quick: one (q1 + q11 took 10.4 min with two, over the 10 planned, after the deployment phases came in session 13)
SHARES_QUICK = (0.5,)
COLDSTARTS = 3  # cold starts in a full calibration (--quick: 1), each a new job on fresh task managers
RESCALE_METHODS_FULL = ("in_place", "savepoint", "reactive")
RESCALE_METHODS_QUICK = ("in_place", "savepoint")
GROWN_STATE_METHODS = ("in_place", "savepoint")  # scaled up again once the state has grown
GROWN_STATE_BYTES = 20e6  # ... to at least this many bytes (and twice the first rescales' state)


@dataclass(frozen=True)
class Durations:
    level_s: float = 15.0  # one ladder level
    overload_s: float = 15.0
    share_s: float = 14.0
    settle_s: float = 6.0  # discarded at the start of a phase (meters, buffers, the generator)
    rescale_settle_s: float = 5.0  # running time after a rescale before the next one
    parallelism_s: float = 20.0
    warmup_s: float = 25.0  # the JVMs' JIT at a full CPU before anything is measured
    cold_s: float = 60.0  # fresh task managers at their quota, overloaded: the warm-up curve (tau <= 15 s at 0.25 CPU)
    cold_bin_s: float = 10.0  # one point of that curve
    # after each restart onto running task managers (and once before the rescales), the moderate rate held
    # so every operator's readings are measured in that deployment: the error a deployment keeps
    deployment_s: float = 15.0
    deployment_settle_s: float = 5.0  # plus the rescale's own settle before it: readings 10 s after the restart
    bottleneck_s: float = 25.0  # one operator as the job's only bottleneck, its upstream scaled out (readings from
    # rescale_settle_s + deployment_settle_s after the restart on, as a deployment phase's)

    def scaled(self, f: float) -> Durations:
        d = Durations(*(v * f for v in (self.level_s, self.overload_s, self.share_s, self.settle_s,
                                         self.rescale_settle_s, self.parallelism_s, self.warmup_s,
                                         self.cold_s, self.cold_bin_s, self.deployment_s,
                                         self.deployment_settle_s, self.bottleneck_s)))
        # a deployment's readings need one meter update after its settling, however short the run
        return replace(d, deployment_s=max(d.deployment_s, d.deployment_settle_s + METER_S))


FULL = Durations()
QUICK = Durations(level_s=10.0, overload_s=12.0, share_s=10.0, settle_s=5.0, rescale_settle_s=3.0,
                  parallelism_s=15.0, warmup_s=15.0, cold_s=45.0, deployment_s=8.0, deployment_settle_s=3.0,
                  bottleneck_s=15.0)


def stateful_operator(topology: Topology) -> str:
    """The operator to rescale: the stateful one (its state moves), else the first non-source."""
    for op in topology.operators:
        if op.state_bytes_per_record > 0 or op.state_ttl_s is not None:
            return op.name
    return topology.operators[len(topology.sources)].name


@dataclass(frozen=True)
class QueryPlan:
    query: str
    ladder: tuple[float, ...]
    shares: tuple[float, ...]
    parallelisms: tuple[int, ...]
    methods: tuple[str, ...]
    durations: Durations
    operators: tuple[str, ...] = field(default_factory=tuple)
    bottlenecks: tuple[str, ...] = field(default_factory=tuple)  # operators made the only bottleneck in turn
    spread: tuple[float, ...] = ()  # the spread phase's levels (fractions of its top rate); none: no phase
    coldstarts: int = 1  # cold starts, each a new job on fresh task managers

    @property
    def measure_s(self) -> float:
        """Seconds of load phases (ladder, spread, overload, shares, bottlenecks, parallelism)."""
        d = self.durations
        extra_p = [p for p in self.parallelisms if p > 1]
        return (self.coldstarts * d.cold_s + d.warmup_s + 2 * d.overload_s
                + (len(self.ladder) + len(self.spread)) * d.level_s
                + len(self.operators) * len(self.shares) * d.share_s + len(extra_p) * d.parallelism_s
                + len(self.bottlenecks) * d.bottleneck_s)

    @property
    def estimate_s(self) -> float:
        """Expected wall time including job start and rescales (for the progress bar)."""
        d = self.durations
        # deployment_s includes its settling (and, at run time, the catch-up after a restart's downtime)
        rescale = 2 * len(self.methods) * (20.0 + d.rescale_settle_s) + (len(self.methods) + 1) * d.deployment_s
        if self.bottlenecks:  # a rescale into each layout and one back
            rescale += (len(self.bottlenecks) + 1) * 20.0
        if self.spread:  # into the spread layout and back
            rescale += 2 * 20.0
        return (1 + self.coldstarts) * 25.0 + self.measure_s + rescale  # job starts: the measured one, the cold starts'


def plan_for(topology: Topology, quick: bool, parallelisms: tuple[int, ...] = (1,),
             time_scale: float = 1.0) -> QueryPlan:
    d = (QUICK if quick else FULL).scaled(time_scale)
    return QueryPlan(
        query=topology.query,
        ladder=LADDER_QUICK if quick else LADDER,
        shares=SHARES_QUICK if quick else SHARES,
        parallelisms=parallelisms,
        methods=RESCALE_METHODS_QUICK if quick else RESCALE_METHODS_FULL,
        durations=d,
        operators=topology.names,
        bottlenecks=bottleneck_operators(topology, quick),
        spread=() if quick else SPREAD,  # q1 + q11 already take 9.4 min with --quick (session 14)
        coldstarts=1 if quick else COLDSTARTS,
    )


def bottleneck_operators(topology: Topology, quick: bool) -> tuple[str, ...]:
    """The operators a `bottleneck` phase makes the job's only bottleneck: every one, the non-sources in
    topological order, then the sources (each reads the backlog in Kafka the phases before it left, at share 1.0
    with its downstream scaled out: without it a source behind a slower operator never saturates at its full
    share, and its capacity comes from its lower shares alone; measured: q11's source at 0.1 CPU, fitted 22.1k/s
    from its share-0.25 plateau, took 27-32k/s per subtask in a run's backlog with a fifth of its quota to spare).
    None with `--quick`: one such phase cost about 40 s per query (a rescale there and back, fresh task
    managers' JIT), and q1 + q11 took 11.0 min with it, over the 10 planned (session 14); a quick profile's busy
    reading of a queued input stays unmeasured (NaN), and the sim reads the line there."""
    if quick:
        return ()
    return (tuple(op.name for op in topology.operators if not op.is_source)
            + tuple(op.name for op in topology.operators if op.is_source))


def spread_layout(rate_at_capacity: dict[str, float]) -> tuple[float, dict[str, int]]:
    """The spread phase's top rate and layout from each operator's `rate_at_capacity` (the generator's records/s
    that bring one of its subtasks to its capacity; infinite for an operator the pattern does not feed).

    The top rate is the highest at which every operator fits in `SPREAD_SUBTASKS_MAX` subtasks at `SPREAD_TOP` of
    their capacity, and no higher than brings the fastest one to `SPREAD_TOP` at `SPREAD_SUBTASKS`; each operator
    gets the fewest subtasks (at least `SPREAD_SUBTASKS`) that keep it at `SPREAD_TOP` or below there. So every
    operator is scaled out and nothing saturates; the slowest reaches `SPREAD_TOP` unless the cap at the fastest
    lowers the rate (q1 at 0.1 CPU: source 0.8 at 3 subtasks, map 0.62 at 3, sink 0.56 at 2; two operators at 10k
    and 12k/s: 0.64 and 0.8 at 2)."""
    fed = {op: r for op, r in rate_at_capacity.items() if math.isfinite(r) and r > 0}
    if not fed:
        raise ValueError("no operator has a finite rate at capacity: nothing to spread")
    top = min(min(SPREAD_SUBTASKS_MAX * SPREAD_TOP * r for r in fed.values()),
              max(SPREAD_SUBTASKS * SPREAD_TOP * r for r in fed.values()))
    layout = {op: max(SPREAD_SUBTASKS, math.ceil(top / (SPREAD_TOP * fed[op]) - 1e-9)) if op in fed
              else SPREAD_SUBTASKS for op in rate_at_capacity}
    return top, layout
