"""The seed papers' experiments and claims, as `bench reproduce PAPER` runs and scores them.

Each claim cites the paper's section and its own figure; the experiment files' headers say
what is the paper's setup and what this harness substitutes. Paper figures are quoted from
the papers' full texts (Tab. III of Gesscale, Tab. 7 and sec. 5.3 of the MPC
paper, Tab. I/II and sec. VII of MEAD, sec. 4.2 of Flink-ER).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.reproduce.claims import Claim, Direction, Holds, Relative, Select


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    experiments: tuple[str, ...]  # experiment files, relative to the repository root
    claims: tuple[Claim, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)  # what differs from the paper, for the report
    # claim -> the setup difference that is the likely cause when it does not reproduce (issue 14, item 5),
    # with the setup check that measured it; the report lists it under every such claim
    causes: Mapping[str, str] = field(default_factory=dict)


LOWER, HIGHER = Direction.LOWER, Direction.HIGHER

# ---------------------------------------------------------------- Gesscale (Arkian et al. 2021)

_G = "gesscale-fog"
GESSCALE_ = Select("Gesscale", _G, "gesscale")
MDL = Select("MDL-NLUnaware", _G, "mdl-nlunaware")
THR_U = Select("THR-NLUnaware", _G, "thr-nlunaware")
THR_A = Select("THR-NLAware", _G, "thr-nlaware")

_S = "gesscale-sensitivity"
_LOSS = 0.0033333


def _sens(label: str, name: str, downtime: float, loss: float) -> Select:
    return Select(f"{label} [{downtime:g} s restart, gamma/alpha {'1/300' if loss else '0'}]", _S, name, {},
                  {"sim.rescale_downtime_s": downtime, "sim.network.mst_loss_per_ms": loss})


def _gesscale_checks() -> tuple[Claim, ...]:
    """The main claims again where one substitution is undone or removed (setup checks, issue item 5)."""
    names = (("Gesscale", "gesscale"), ("MDL-NLUnaware", "mdl-nlunaware"), ("THR-NLUnaware", "thr-nlunaware"),
             ("THR-NLAware", "thr-nlaware"))
    fast = {n: _sens(lab, n, 12, _LOSS) for lab, n in names}
    flat = {n: _sens(lab, n, 120, 0.0) for lab, n in names}
    return (
        Relative("setup check, 12 s restarts: fewer reconfigurations than THR-NLUnaware", "Tab. III",
                 "-52 % (25 -> 12)", "spec_reconfigurations", fast["gesscale"], fast["thr-nlunaware"], LOWER),
        Relative("setup check, 12 s restarts: less cost than THR-NLUnaware", "Tab. III",
                 "-17 % (1,199.5 -> 999.5 replica-min)", "spec_cost_replica_min", fast["gesscale"],
                 fast["thr-nlunaware"], LOWER),
        Relative("setup check, 12 s restarts: less excess time than THR-NLAware", "Tab. III",
                 "-63.5 % (0.115 -> 0.042)", "spec_excess_time", fast["gesscale"], fast["thr-nlaware"], LOWER),
        Relative("setup check, no network effect: latency awareness, less cost than MDL-NLUnaware", "Tab. III",
                 "-21 % (1,270.5 -> 999.5 replica-min)", "spec_cost_replica_min", flat["gesscale"],
                 flat["mdl-nlunaware"], LOWER),
        Relative("setup check, no network effect: THR-NLAware fewer reconfigurations than THR-NLUnaware",
                 "Tab. III", "-24 % (25 -> 19)", "spec_reconfigurations", flat["thr-nlaware"],
                 flat["thr-nlunaware"], LOWER),
    )


_W = "gesscale-setup-checks"


def _waiting(label: str, name: str) -> Select:
    return Select(f"{label} [network loss is waiting, not CPU]", _W, name, {}, {"sim.network.loss_burns_cpu": False})


def _vs_thr_unaware(check: str, g: Select, thr_u: Select) -> tuple[Claim, ...]:
    """Tab. III's three claims of Gesscale against THR-NLUnaware, under one setup check's runs."""
    return (
        Relative(f"{check}: fewer reconfigurations than THR-NLUnaware", "Tab. III", "-52 % (25 -> 12)",
                 "spec_reconfigurations", g, thr_u, LOWER),
        Relative(f"{check}: less cost than THR-NLUnaware", "Tab. III", "-17 % (1,199.5 -> 999.5 replica-min)",
                 "spec_cost_replica_min", g, thr_u, LOWER),
        Relative(f"{check}: less excess time than THR-NLUnaware", "Tab. III", "-74 % (0.163 -> 0.042)",
                 "spec_excess_time", g, thr_u, LOWER),
    )


def _mdl_vs_thr_unaware(check: str, mdl: Select, thr_u: Select) -> Claim:
    return Relative(f"{check}: MDL-NLUnaware fewer reconfigurations than THR-NLUnaware", "Tab. III",
                    "-36 % (25 -> 16)", "spec_reconfigurations", mdl, thr_u, LOWER)


def _gesscale_cpu_checks() -> tuple[Claim, ...]:
    """The threshold comparisons again where the network's loss burns no CPU (gesscale-setup-checks.yaml)."""
    g, mdl = _waiting("Gesscale", "gesscale"), _waiting("MDL-NLUnaware", "mdl-nlunaware")
    thr_u, thr_a = _waiting("THR-NLUnaware", "thr-nlunaware"), _waiting("THR-NLAware", "thr-nlaware")
    check = "setup check, network delay burns no CPU"
    return (
        *_vs_thr_unaware(check, g, thr_u),
        Relative(f"{check}: less excess time than THR-NLAware", "Tab. III", "-63.5 % (0.115 -> 0.042)",
                 "spec_excess_time", g, thr_a, LOWER),
        Relative(f"{check}: better under-provisioning accuracy than THR-NLAware", "Tab. III",
                 "-22 % accuracyU (0.640 -> 0.499)", "spec_accuracy_u", g, thr_a, LOWER),
        _mdl_vs_thr_unaware(check, mdl, thr_u),
        Relative(f"{check}: THR-NLAware fewer reconfigurations than THR-NLUnaware", "Tab. III",
                 "-24 % (25 -> 19)", "spec_reconfigurations", thr_a, thr_u, LOWER),
    )


_P = "gesscale-partitions"
EVEN_PARTITIONS = 840  # gesscale-partitions.yaml's kafka.partitions: lcm(1..8), every replica count divides it


def _even(label: str, name: str) -> Select:
    return Select(f"{label} [{EVEN_PARTITIONS} partitions]", _P, name, {}, {"kafka.partitions": EVEN_PARTITIONS})


def _gesscale_partition_checks() -> tuple[Claim, ...]:
    """The main claims again with the input spread evenly over the replicas (gesscale-partitions.yaml)."""
    g, mdl, thr_u = _even("Gesscale", "gesscale"), _even("MDL-NLUnaware", "mdl-nlunaware"), _even(
        "THR-NLUnaware", "thr-nlunaware")
    check = "setup check, input spread evenly over the replicas"
    return (
        *_vs_thr_unaware(check, g, thr_u),
        Relative(f"{check}: latency awareness, less cost than MDL-NLUnaware", "Tab. III",
                 "-21 % (1,270.5 -> 999.5 replica-min)", "spec_cost_replica_min", g, mdl, LOWER),
        _mdl_vs_thr_unaware(check, mdl, thr_u),
    )


_CPU_CHARGED = (
    "the threshold baselines are never behind: the simulator charges the network delay's loss (eq. 1's gamma x "
    "ND_max) as CPU time, so THR's CPU rule sees every overload and, with each 120 s restart's backlog, rides "
    "at 7.9 of 8 nodes (excess time 0 for every scaler here); on the paper's tc-delayed Raspberry Pis waiting "
    "on a link burns no CPU (sec. III-B, IV-C3). Measured: with the loss read as waiting THR-NLAware falls "
    "behind (excess time 0.052 vs Gesscale's 0: yes) and THR-NLUnaware hardly scales up (0.67: partly) - the "
    "'network delay burns no CPU' setup checks and the notes.")
GESSCALE_CAUSES = {
    "processes more data: less excess time than THR-NLUnaware": _CPU_CHARGED,
    "less excess time than THR-NLAware": _CPU_CHARGED,
    "better under-provisioning accuracy than THR-NLAware":
        "THR rides at the cap (see the excess-time claims) and is under-provisioned 0.2 % of the time. Not "
        "explained by a measured setup difference: with the loss read as waiting THR-NLAware is still "
        "under-provisioned less than Gesscale (accuracyU 0.008 vs 0.023).",
    "latency awareness: less cost than MDL-NLUnaware":
        "the topic's 8 partitions split unevenly over 5-7 replicas (Flink's Kafka source: a partition is read "
        "by one subtask), so Gesscale's eq. 1 samples are taken 19-36 % below capacity, its fitted network "
        "term is 6.6x too large and its scale-down (Alg. 4) too cautious; the paper's eq. 1 and its under-2 % "
        "model error imply input spread evenly. Measured: with 840 partitions -5 % [-6, -4], yes (the 'input "
        "spread evenly' setup check; notes).",
    "latency-aware thresholds: fewer reconfigurations than latency-unaware":
        "both threshold scalers ride at 7.8-7.9 of 8 nodes (the CPU-charged network loss and 120 s restarts), "
        "so there is no node left to choose (ND_max 288 vs 296 ms). Measured, not reproduced by any setup "
        "check: with the loss read as waiting THR-NLAware makes 20 reconfigurations (the paper's 19) but "
        "THR-NLUnaware, whose CPU cannot pass 0.9 on its random far nodes, hardly scales up (6.3).",
}


GESSCALE = Paper(
    key="gesscale",
    title="Gesscale: model-based stream processing auto-scaling in geo-distributed environments (Arkian et al. 2021)",
    experiments=("experiments/gesscale-fog.yaml", "experiments/gesscale-sensitivity.yaml",
                 "experiments/gesscale-setup-checks.yaml", "experiments/gesscale-partitions.yaml"),
    claims=(
        Relative("fewer reconfigurations than THR-NLUnaware", "abstract, sec. V-B, Tab. III",
                 "-52 % (25 -> 12)", "spec_reconfigurations", GESSCALE_, THR_U, LOWER),
        Relative("less cost than THR-NLUnaware", "abstract, sec. VI, Tab. III",
                 "-17 % (1,199.5 -> 999.5 replica-min)", "spec_cost_replica_min", GESSCALE_, THR_U, LOWER),
        Relative("processes more data: less excess time than THR-NLUnaware", "abstract, Tab. III",
                 "-74 % (0.163 -> 0.042)", "spec_excess_time", GESSCALE_, THR_U, LOWER),
        Relative("fewer reconfigurations than THR-NLAware", "sec. V-B, Tab. III",
                 "-37 % (19 -> 12)", "spec_reconfigurations", GESSCALE_, THR_A, LOWER),
        Relative("less cost than THR-NLAware", "sec. V-B, Tab. III",
                 "-16 % (1,193.75 -> 999.5 replica-min)", "spec_cost_replica_min", GESSCALE_, THR_A, LOWER),
        Relative("less excess time than THR-NLAware", "sec. V-B, Tab. III",
                 "-63.5 % (0.115 -> 0.042)", "spec_excess_time", GESSCALE_, THR_A, LOWER),
        Relative("better over-provisioning accuracy than THR-NLAware", "sec. V-B, Tab. III",
                 "-45 % accuracyO (1.517 -> 0.838)", "spec_accuracy_o", GESSCALE_, THR_A, LOWER),
        Relative("better under-provisioning accuracy than THR-NLAware", "sec. V-B, Tab. III",
                 "-22 % accuracyU (0.640 -> 0.499)", "spec_accuracy_u", GESSCALE_, THR_A, LOWER),
        Relative("latency awareness: less cost than MDL-NLUnaware", "sec. V-B, Tab. III",
                 "-21 % (1,270.5 -> 999.5 replica-min)", "spec_cost_replica_min", GESSCALE_, MDL, LOWER),
        Relative("model-based scale-down: MDL-NLUnaware fewer reconfigurations than THR-NLUnaware",
                 "sec. V-B, Tab. III", "-36 % (25 -> 16)", "spec_reconfigurations", MDL, THR_U, LOWER),
        Relative("latency-aware thresholds: fewer reconfigurations than latency-unaware", "sec. V-B, Tab. III",
                 "-24 % (25 -> 19)", "spec_reconfigurations", THR_A, THR_U, LOWER),
        *_gesscale_checks(),
        *_gesscale_cpu_checks(),
        *_gesscale_partition_checks(),
    ),
    notes=(
        "Latency awareness (measured 2026-11-26 on the gesscale-fog records with "
        "`benchmarks/bench_gesscale_latency.py`): the scalers do see a per-node delay (ND_max, the sim's "
        "fog-node model, in every snapshot and in Gesscale's calibration samples) and node choice does change "
        "it (nearest-first: 10, 35, 70, 115, 170, 240, 300 ms at 2..8 replicas; random: e.g. 205-300 ms at 5-6). "
        "It saves nothing here for two measured reasons. (1) THR-NLAware and THR-NLUnaware sit at 7.8 of 8 "
        "nodes (each 120 s restart's backlog drives CPU to 1.0 and the rule adds the node back), where both "
        "have ND_max 300 ms most of the time (means 288 vs 296 ms): no node left to choose. "
        "(2) Gesscale's eq. 1 calibration takes MST(n) = CT when the source's lag grows (the harness' stand-in for "
        "Alg. 1's upstream back pressure), but at 5-7 "
        "replicas the operator is then only 70-81 % busy, so the samples are 19-36 % below the simulator's "
        "capacity at that n and ND_max; under nearest-first placement ND_max rises with n, so the fit puts the "
        "flattening on the network: gamma 2,150 per ms where the sim's is 326 (6.6x), MST(7 replicas at "
        "300 ms) predicted 281 k rec/s. Its scale-down (Alg. 4) is therefore too cautious and it holds more "
        "nodes (6.14 vs 6.00 time-weighted) than MDL-NLUnaware, whose eq. 2 alpha is uniformly low (64-68 k "
        "vs 95 k). The paper requires its samples to be taken 'where the operator is working at its maximum "
        "capacity' (sec. IV-C1). Why the sim's Kafka source is partly idle while its lag grows (measured "
        "2026-11-27 on the gesscale-fog records): the topic has 8 partitions (kafka.partitions defaults to the "
        "pool of 8) and a partition is read by one source subtask, so at 5-7 replicas some subtasks read two "
        "partitions and the others one. In gesscale+8-r0 at t = 3,615-3,705 s (5 replicas, partitions "
        "2/2/2/1/1, input 404 k/s) the three two-partition subtasks are saturated at 90.4 k records/s each "
        "and their partitions' lag grows while the two others take their 50.5 k/s at 56 % busy: processed "
        "3 x 90.4 k + 2 x 50.5 k = 372 k/s, mean busy 0.82, as recorded; over the runs the recorded busy "
        "while the lag grows matches this split at every n (0.82 / 0.72 / 0.71 at n = 5 / 6 / 7 for "
        "Gesscale). The operator then sustains 4 replicas' worth at n = 4..7 (capacity x 8 / ceil(8 / n)), "
        "which is Flink's Kafka source (no subtask takes another's partitions), not a fault of the sim, "
        "and Gesscale's samples at n = 5-7 are taken below capacity. The paper does not give its partition "
        "count, but its eq. 1 (every replica adds capacity) and its under-2 % model error imply an input "
        "spread evenly over the replicas. Measured with 840 partitions (lcm of 1..8; "
        "experiments/gesscale-partitions.yaml, the 'input spread evenly' setup-check claims; `bench matrix "
        "experiments/gesscale-fog.yaml --set kafka.partitions=840 --workers 1 --results DIR` and "
        "`benchmarks/bench_gesscale_latency.py --results DIR/gesscale-fog`): every calibration sample is "
        "taken at busy 1.00 and equals the sim's capacity, Gesscale's eq. 1 fit recovers the sim's model "
        "(alpha 100,000, beta 1, gamma 333.3 per ms), it holds 4.9 task managers (6.2 with 8 partitions) "
        "and costs 1,408 replica-min against MDL-NLUnaware's 1,476 (latency awareness -5 % [-6, -4], paper "
        "-21 %; +2 % with 8 partitions) and the threshold scalers' 2,277 (-38 %, paper -17 %), with 20 "
        "reconfigurations against their 31 (-35 %, paper -52 %); MDL-NLUnaware's 19.3 are -38 % (paper -36 %). "
        "The threshold scalers are unchanged (they "
        "read CPU and stay at the cap).",
        "Why the threshold baselines never fall behind, measured (issue 14, item 5; "
        "`experiments/gesscale-setup-checks.yaml`): gesscale-fog.yaml's simulator charges the capacity the "
        "network delay takes (eq. 1's gamma x ND_max) as CPU time, so an operator at its network-limited MST "
        "reads saturated CPU and the CPU rules (> 90 % -> +1, < 50 % -> -1) see every overload; with each "
        "120 s restart's backlog driving CPU to 1.0 they ride at 7.9 of 8 nodes and are never behind "
        "(excess time 0, timeshareU 0.2 %). On the paper's tc-delayed Raspberry Pis waiting on a link "
        "burns no CPU, and the paper says CPU utilisation 'cannot be used to detect operator overload' "
        "(sec. III-B) and 'is a poor predictor' (sec. IV-C3). With the loss read as waiting "
        "(`sim.network.loss_burns_cpu: false`; Gesscale and MDL-NLUnaware, which read back pressure and "
        "lag, run unchanged) THR-NLAware makes 20 reconfigurations (paper 19), falls behind (excess time "
        "0.052 vs Gesscale's 0: the 'processes more data' direction, yes) and costs 1,808 replica-min "
        "(Gesscale 1,781, -1.5 %); THR-NLUnaware, whose random nodes reach ND_max 300 ms where its CPU "
        "cannot pass 0.9 (0.03 + 0.97 x (1 - 1/n) < 0.9 for n <= 8), hardly scales up: 5-8 "
        "reconfigurations, 71-77 % of the time under-provisioned, excess time 0.40-1.12 of the trace "
        "(paper: 25, 30 %, 0.163). So the CPU reading is the likely cause of the excess-time miss, but "
        "with all of the loss as waiting the unaware rule overshoots the paper's picture; the paper "
        "does not say how much of the loss its Raspberry Pis spent on CPU, so the harness keeps "
        "'loss burns CPU' as gesscale-fog's default and reports both ends.",
    ),
    causes=GESSCALE_CAUSES,
)

# ---------------------------------------------------------------- MPC (De Matteis & Mencagli)


POWER_LEVELS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)  # 1.2 .. 2.0 GHz of 2.0 GHz (sec. 5)


def _mpc(matrix: str, step: float, setting: Mapping[str, object] | None = None) -> dict[str, Select]:
    cfg = {"loop.period_s": step, **(setting or {})}
    th = {"objective": "throughput"}
    return {
        "th2": Select(f"Th-Node h=2 ({step:g} s)", matrix, "mpc", {**th, "horizon": 2, "gamma": 0.4}, cfg),
        "sw1": Select(f"Th-Node Sw h=1 ({step:g} s)", matrix, "mpc", {**th, "horizon": 1, "gamma": 0.4}, cfg),
        "nosw": Select(f"Th-Node NoSw ({step:g} s)", matrix, "mpc",
                       {**th, "horizon": 1, "gamma": 0.0, "cpu_levels": None}, cfg),
        "power": Select(f"Th-Power NoSw ({step:g} s)", matrix, "mpc",
                        {**th, "gamma": 0.0, "horizon": 1, "cpu_levels": list(POWER_LEVELS)}, cfg),
        "rule1": Select(f"Rule-based* ({step:g} s)", matrix, "rule-based", {"scale_up_above": 0.9}, cfg),
        "rule2": Select(f"Rule-based** ({step:g} s)", matrix, "rule-based", {"scale_up_above": 0.95}, cfg),
        "spl": Select(f"SPL-strategy ({step:g} s)", matrix, "spl-strategy", {}, cfg),
        "static": Select(f"static peak ({step:g} s)", matrix, "static", {}, cfg),
    }


def _mpc_claims(matrix: str, step: float, where: str, check: str = "",
                setting: Mapping[str, object] | None = None) -> tuple[Claim, ...]:
    """Tab. 7 and sec. 5.3's claims on one matrix at one step; `check` names a setup check (issue item 5)
    whose cells have the config values `setting`."""
    s = _mpc(matrix, step, setting)
    c = f"setup check, {check}: " if check else ""
    return (
        Relative(f"{c}fewer reconfigurations than Rule-based* [{where}]", "sec. 5.4, Tab. 7",
                 "-72 % (39.17 -> 11)", "saso_reconfigurations", s["th2"], s["rule1"], LOWER),
        Relative(f"{c}fewer reconfigurations than Rule-based** [{where}]", "sec. 5.4, Tab. 7",
                 "-62 % (29 -> 11)", "saso_reconfigurations", s["th2"], s["rule2"], LOWER),
        Relative(f"{c}fewer QoS violations than Rule-based* [{where}]", "sec. 5.4, Tab. 7",
                 "-10 % (62 -> 56)", "saso_qos_violations", s["th2"], s["rule1"], LOWER),
        Relative(f"{c}fewer QoS violations than Rule-based** [{where}]", "sec. 5.4, Tab. 7",
                 "-5 % (59 -> 56)", "saso_qos_violations", s["th2"], s["rule2"], LOWER),
        Relative(f"{c}fewer replicas than Rule-based* [{where}]", "sec. 5.4, Tab. 7",
                 "-2.6 % (4.63 -> 4.51)", "tm_avg", s["th2"], s["rule1"], LOWER),
        Relative(f"{c}fewer reconfigurations than the SPL strategy [{where}]", "sec. 5.4, Tab. 7",
                 "-73 % (40.18 -> 11)", "saso_reconfigurations", s["th2"], s["spl"], LOWER),
        Relative(f"{c}fewer QoS violations than the SPL strategy [{where}]", "sec. 5.4, Tab. 7",
                 "-3.4 % (58 -> 56)", "saso_qos_violations", s["th2"], s["spl"], LOWER),
        Relative(f"{c}fewer replicas than the SPL strategy [{where}]", "sec. 5.4, Tab. 7",
                 "-2.6 % (4.63 -> 4.51)", "tm_avg", s["th2"], s["spl"], LOWER),
        Relative(f"{c}switching cost: fewer reconfigurations (Sw h=1 vs NoSw) [{where}]", "sec. 5.3.1, Result 1",
                 "lower (Fig. 11-12)", "saso_reconfigurations", s["sw1"], s["nosw"], LOWER),
        Relative(f"{c}switching cost: fewer QoS violations (Sw h=1 vs NoSw) [{where}]", "sec. 5.3.3, Result 3",
                 "lower (Fig. 15-16)", "saso_qos_violations", s["sw1"], s["nosw"], LOWER),
        Relative(f"{c}switching cost: smaller amplitude (Sw h=1 vs NoSw) [{where}]", "sec. 5.3.4, Result 4",
                 "lower (Fig. 17)", "saso_amplitude", s["sw1"], s["nosw"], LOWER),
        Relative(f"{c}switching cost: overshoot, more resources (Sw h=1 vs NoSw) [{where}]", "sec. 5.3.2, Result 2",
                 "higher (Fig. 14)", "alloc_cores_avg", s["sw1"], s["nosw"], HIGHER),
        Relative(f"{c}frequency scaling saves power: Th-Power vs Th-Node [{where}]", "sec. 5.3.2",
                 "-13..14 W (about -28 %)", "alloc_cores_avg", s["power"], s["nosw"], LOWER),
        Relative(f"{c}elasticity saves power vs static peak: Th-Power NoSw [{where}]", "sec. 5.3.2",
                 "-48.6 % (68.25 W static)", "alloc_cores_avg", s["power"], s["static"], LOWER),
    )


_NO_STOP = {"sim.rescale_downtime_s": 0.0, "sim.taskmanager_startup_s": 0.0, "sim.taskmanager_warmup": False}


def _mpc_checks() -> tuple[Claim, ...]:
    """The 4 s claims with FastFlow's no-stop reconfiguration, its exact per-tuple times, or both
    (mpc-setup-checks.yaml)."""
    m, step, where = "mpc-setup-checks", 4, "paper's 4 s step"
    return (_mpc_claims(m, step, where, "reconfiguration without a stop", {**_NO_STOP, "sim.readings": "flink"})
            + _mpc_claims(m, step, where, "exact readings", {"sim.rescale_downtime_s": None, "sim.readings": "exact"})
            + _mpc_claims(m, step, where, "no stop and exact readings", {**_NO_STOP, "sim.readings": "exact"}))


def _mpc_causes(where: str) -> dict[str, str]:
    """The likely cause of each Tab. 7 / sec. 5.3 claim at one step that does not reproduce on the Flink
    stand-in, measured by mpc-setup-checks.yaml (4 s step)."""
    gauge = ("the rule reads Flink's busyTimeMsPerSecond, nearly flat on q11's calibrated profile (0.68 + "
             "0.046 x the true busy fraction), so it only scales down (4 reconfigurations, then 1 source and 1 "
             "window subtask); the paper's FastFlow measures each tuple's time (sec. 3.1, 5.2.1) and "
             "reconfigures without stopping (sec. 4.2.2). Measured: with exact readings and no stop "
             "('no stop and exact readings' setup check) reconfigurations -48 / -44 % and replicas -5 %, yes.")
    over = ("MPC reads the same flat gauge and overestimates its service time at low load: it holds 20-22 task "
            "managers (the static peak 16), and each Flink rescale stops the job for ~4 s. Measured: with exact "
            "readings and no stop, violations vs SPL -60 % (yes), replicas vs SPL -4 % (partly), power vs the "
            "static peak -51 % (yes).")
    switching = ("no measured setup difference explains it: the sec. 5.3 switching-cost results do not "
                 "reproduce in the setup checks either (at most partly with exact readings and no stop), and "
                 "the harness has no further measurement of why.")
    if where.startswith("step"):
        gauge += " The 60 s step keeps Flink's readings, so the rule is blind there too (3.2 task managers)."
    return {
        f"fewer reconfigurations than Rule-based* [{where}]": gauge,
        f"fewer reconfigurations than Rule-based** [{where}]": gauge,
        f"fewer replicas than Rule-based* [{where}]": gauge,
        f"fewer QoS violations than the SPL strategy [{where}]": over,
        f"fewer replicas than the SPL strategy [{where}]": over,
        f"elasticity saves power vs static peak: Th-Power NoSw [{where}]": over,
        f"switching cost: fewer reconfigurations (Sw h=1 vs NoSw) [{where}]": switching,
        f"switching cost: fewer QoS violations (Sw h=1 vs NoSw) [{where}]": switching,
        f"switching cost: smaller amplitude (Sw h=1 vs NoSw) [{where}]": switching,
        f"switching cost: overshoot, more resources (Sw h=1 vs NoSw) [{where}]": switching,
    }


MPC = Paper(
    key="mpc",
    title="Keep calm and react with foresight: MPC for elastic data stream processing (De Matteis & Mencagli)",
    experiments=("experiments/mpc-tab7.yaml", "experiments/mpc-scaled.yaml", "experiments/mpc-setup-checks.yaml"),
    claims=(_mpc_claims("mpc-tab7", 4, "paper's 4 s step") + _mpc_claims("mpc-scaled", 60, "step x15: 60 s")
            + _mpc_checks()),
    notes=(
        "Monitoring at the 4 s step (issue 14, item 5): mpc-tab7.yaml samples every second, as the paper "
        "(sec. 5.2.1). At the default 5 s scrape a 4 s (or 2 s) metrics window holds fewer than two scrapes, "
        "every rate is unmeasured and MPC skips every decision (decision_skipped: 'fewer than two scrapes in "
        "the window'), which scored as '0 reconfigurations, reproduced'; "
        "tests/analysis/test_catalogue.py now checks every paper cell's window for two scrapes.",
        "Why Rule-based and MPC are far from Tab. 7 on the Flink stand-in, measured with "
        "`experiments/mpc-setup-checks.yaml`: both read the per-record work from Flink's busyTimeMsPerSecond "
        "(the rule's utilisation factor; MPC's service time T = busy x share / records per subtask), and the "
        "calibrated q11 profile's session-window busy gauge is nearly flat (0.68 + 0.046 x the true busy "
        "fraction). The rule (theta_max 0.9, theta_min 0.8) reads 0.68-0.73 whatever the load, so it only "
        "ever scales down: 4 reconfigurations in the first 16-41 s to 1 source and 1 window subtask, then "
        "56 of 59 steps in violation with 27 % of the input processed; MPC overestimates T at low load and "
        "holds 20-22 task managers against the static peak's 16. The paper's FastFlow operator measures each "
        "tuple's computation time in clock ticks every second (sec. 3.1, 5.2.1) and reconfigures without "
        "stopping (sec. 4.2.2: state handed over by reference in shared memory). With both (`sim.readings: "
        "exact`, no stop, no start-up, no warm-up) the rule reacts (49-54 reconfigurations in 59 steps; the "
        "paper's 29-39 of ~59), MPC h=2 holds 8.9 task managers, and Tab. 7 reproduces in direction for "
        "reconfigurations (vs Rule-based* / ** / SPL: -48 / -44 / -50 %), QoS violations against SPL "
        "(-60 %) and replicas against Rule-based* (-5 %, the paper's -2.6 %); violations against the rule "
        "do not (8.3 vs 7.3 of 59, wide intervals), nor do the switching-cost results of sec. 5.3. Either "
        "change alone is not enough: exact readings with Flink's stop leave MPC at 14.8 task managers and "
        "more reconfigurations than the rule; no stop with Flink's readings leaves the rule blind.",
    ),
    causes={**_mpc_causes("paper's 4 s step"), **_mpc_causes("step x15: 60 s")},
)

# ---------------------------------------------------------------- MEAD (Russo Russo et al. 2021)

def _mead(label: str, name: str, statistic: str, target: float | None = None) -> Select:
    matrix = "mead-tab1" if statistic == "mean" else "mead-tab2"
    cfg: dict[str, object] = {"slo.latency_statistic": statistic}
    if target is not None:
        cfg["slo.latency_s"] = target
    return Select(label, matrix, name, {}, cfg)


MEAN_TARGETS = (1.5, 3.0, 5.0)  # Tab. I, LM trace
P95_TARGETS = (7.0, 10.0)  # Tab. II, LM trace
BUFFER_SPAN_S = 300.0  # mead-buffer-span.yaml's `sim.interarrival_window_s`


def _mead_span(label: str, name: str, target: float) -> Select:
    return Select(f"{label} [buffer spans {BUFFER_SPAN_S:g} s]", "mead-buffer-span", name, {},
                  {"slo.latency_statistic": "mean", "slo.latency_s": target,
                   "sim.interarrival_window_s": BUFFER_SPAN_S})


def _mead_checks() -> tuple[Claim, ...]:
    """Tab. I's claims again with MEAD's inter-arrival buffer spanning several burst cycles (issue item 5)."""
    return (
        Holds(f"setup check, buffer spanning {BUFFER_SPAN_S:g} s: MEAD meets mean response-time targets",
              "sec. VII-A, Tab. I", "met for every target (LM: 1.5, 3, 5 s)", "mead_target_met",
              tuple(_mead_span("MEAD", "mead", t) for t in MEAN_TARGETS), True),
        Holds(f"setup check, buffer spanning {BUFFER_SPAN_S:g} s: the M/G/1 planner misses mean targets",
              "sec. VII-A, Tab. I", "missed for every target (LM: 7.5-9.4 s)", "mead_target_met",
              tuple(_mead_span("M/G/1", "mead-mg1", t) for t in MEAN_TARGETS), False),
        *_mead_demand_checks(60.0),
        *_mead_demand_checks(BUFFER_SPAN_S),
    )


def _mead_exact(label: str, name: str, target: float, span: float) -> Select:
    return Select(f"{label} [true busy time, buffer spans {span:g} s]", "mead-setup-checks", name, {},
                  {"slo.latency_statistic": "mean", "slo.latency_s": target, "sim.readings": "exact",
                   "sim.interarrival_window_s": span})


def _mead_demand_checks(span: float) -> tuple[Claim, ...]:
    """Tab. I's claims again with the service demands read from the true busy time, standing in for the
    paper's offline knowledge base (sec. III), at one buffer span (mead-setup-checks.yaml)."""
    check = "setup check, service demand from the true busy time" + (
        "" if span == 60.0 else f" and buffer spanning {span:g} s")
    return (
        Holds(f"{check}: MEAD meets mean response-time targets", "sec. VII-A, Tab. I",
              "met for every target (LM: 1.5, 3, 5 s)", "mead_target_met",
              tuple(_mead_exact("MEAD", "mead", t, span) for t in MEAN_TARGETS), True),
        Holds(f"{check}: the M/G/1 planner misses mean targets", "sec. VII-A, Tab. I",
              "missed for every target (LM: 7.5-9.4 s)", "mead_target_met",
              tuple(_mead_exact("M/G/1", "mead-mg1", t, span) for t in MEAN_TARGETS), False),
        Relative(f"{check}: MEAD's response time is lower than M/G/1's", "sec. VII-A, Tab. I",
                 "-92 % (LM 1.5 s: 7.50 -> 0.75 s)", "mead_rt_mean",
                 _mead_exact("MEAD (mean 1.5 s)", "mead", 1.5, span),
                 _mead_exact("M/G/1 (mean 1.5 s)", "mead-mg1", 1.5, span), LOWER),
    )

_GAUGE = ("MEAD estimates its service demands online from Flink's busy gauge, nearly flat on q11's calibrated "
          "profile (its source demand a median 0.44x, its window's 2.37x the true one), where the paper's come "
          "from knowledge collected offline (sec. III)")
MEAD_CAUSES = {
    "MEAD meets mean response-time targets under bursty input":
        f"{_GAUGE}; and its 50,000-event buffer spans 60 s of input, less than one MMPP cycle. Measured: with the "
        "true busy time 4/9 targets met, with a 300 s buffer too 8/9 (setup checks; notes).",
    "MEAD meets p95 targets under bursty input":
        f"{_GAUGE}. Measured: with the true busy time 1/6 p95 targets met (notes); the rest is not explained by "
        "a measured setup difference.",
    "MEAD's response time is lower than M/G/1's for the same mean target":
        f"{_GAUGE}: MEAD's means spread by ± 10-14 s over three repetitions. Measured: with the true busy time "
        "-70 % [-136, -4], yes (setup check).",
    "the threshold policy answers bursts better than M/G/1":
        "right in direction (-97 %), but M/G/1's mean response time spreads by ± 32 s over three repetitions "
        "(it plans from the same flat gauge); no setup difference: more repetitions would narrow the interval.",
}

MEAD = Paper(
    key="mead",
    title="MEAD: model-based vertical auto-scaling for data stream processing (Russo Russo et al. 2021)",
    experiments=("experiments/mead-tab1.yaml", "experiments/mead-tab2.yaml", "experiments/mead-buffer-span.yaml",
                 "experiments/mead-setup-checks.yaml"),
    claims=(
        Holds("MEAD meets mean response-time targets under bursty input", "sec. VII-A, Tab. I",
              "met for every target (LM: 1.5, 3, 5 s)", "mead_target_met",
              tuple(_mead("MEAD", "mead", "mean", t) for t in MEAN_TARGETS), True),
        Holds("the M/G/1 planner misses mean targets under bursty input", "sec. VII-A, Tab. I",
              "missed for every target (LM: 7.5-9.4 s)", "mead_target_met",
              tuple(_mead("M/G/1", "mead-mg1", "mean", t) for t in MEAN_TARGETS), False),
        Holds("the GI/G/1 (Kingman) planner misses mean targets under bursty input", "sec. VII-A, Tab. I",
              "missed for every target (LM: 6.1-6.3 s)", "mead_target_met",
              tuple(_mead("GI/G/1", "mead-gig1", "mean", t) for t in MEAN_TARGETS), False),
        Holds("MEAD meets p95 targets under bursty input", "sec. VII-B, Tab. II",
              "met (LM: 4.8 s for 7 s, 9.5 s for 10 s)", "mead_target_met",
              tuple(_mead("MEAD", "mead", "p95", t) for t in P95_TARGETS), True),
        Holds("the M/G/1 planner misses p95 targets", "sec. VII-B, Tab. II",
              "missed (LM: 30.1 s for 7 s, 29.6 s for 10 s)", "mead_target_met",
              tuple(_mead("M/G/1", "mead-mg1", "p95", t) for t in P95_TARGETS), False),
        Relative("MEAD allocates less CPU than the static allocation", "abstract, sec. VII-A",
                 "up to -50 % (LM: 54-61 % of 100 %)", "mead_cpu_share",
                 _mead("MEAD (mean 5 s)", "mead", "mean", 5.0), _mead("static 100 %", "static", "mean", 5.0), LOWER),
        Relative("MEAD's response time is lower than M/G/1's for the same mean target", "sec. VII-A, Tab. I",
                 "-92 % (LM 1.5 s: 7.50 -> 0.75 s)", "mead_rt_mean",
                 _mead("MEAD (mean 1.5 s)", "mead", "mean", 1.5), _mead("M/G/1 (mean 1.5 s)", "mead-mg1", "mean", 1.5),
                 LOWER),
        Relative("the threshold policy answers bursts better than M/G/1", "sec. VII-A, Fig. 9",
                 "-68 % (LM: 7.50 -> 2.4 s)", "mead_rt_mean",
                 _mead("threshold", "mead-threshold", "mean", 1.5),
                 _mead("M/G/1 (mean 1.5 s)", "mead-mg1", "mean", 1.5), LOWER),
        *_mead_checks(),
    ),
    notes=(
        "Why MEAD's figures moved with q11's calibrated profile (measured 2026-11-27 with `bench matrix "
        "experiments/mead-tab1.yaml --only autoscaler.name=mead --only slo.latency_s=1.5 --workers 1 --results DIR "
        "[--set KEY=VALUE]`, seeds 1-3, mean response time per run): on the first-guess costs MEAD's means were "
        "2.24 / 3.41 / 5.32 s for the 1.5 / 3 / 5 s targets, on the calibrated profile 6.83 / 7.85 / 9.30 s. "
        "The cause is the busy gauge MEAD estimates its service demands from, not the task-manager warm-up "
        "and not the capacities. At the 1.5 s target: 2.38, 8.86, 9.26 s as committed; 2.38, 8.86, 9.18 s with "
        "sim.taskmanager_warmup=false (MEAD changes CPU shares only and starts no task manager; the initial "
        "ones are warm within ~10 s at 1 CPU, tau 2.75 CPU-seconds); 1.40, 1.89, 3.07 s with "
        "sim.readings=exact (calibrated capacities, true busy time), close to the first guess "
        "(sim.profile=first_guess: 1.94, 2.07, 2.71 s). The calibrated busyTimeMsPerSecond is nearly flat "
        "(queries/topologies/calibrated/q11.cpu-0.25.yaml: source 0.25 + 0.04 x the true busy fraction, window 0.68 + "
        "0.05 x) and MEAD's online estimate, busy x CPU share / records per subtask, follows it: logged at each "
        "of the 90 decisions of the three runs (a diagnostic wrapper around MEAD.loads, not committed), the "
        "source's estimate is a median 0.44 of its true demand (0.30 when the source is over half busy) and "
        "the window's 2.37x (1.00 and 1.00 with exact readings). So MEAD gives the source too little CPU (mean "
        "share 0.53-0.63 vs 0.65-0.75 with the true busy time) and the window too much (0.89-0.92 vs "
        "0.63-0.73): at about the same total CPU the source, not the window, falls behind in the bursts and "
        "records wait in Kafka. The paper's MEAD takes the service demands from knowledge collected offline "
        "(sec. III), which the harness has no equivalent of; the setup-check claims 'service demand from the "
        "true busy time' (experiments/mead-setup-checks.yaml) stand in for it: 4/9 mean targets met with the "
        "60 s buffer and 8/9 with 300 s (first guess: 2/9 and 9/9), the M/G/1 planner 0/9 (mean 7.1 s); p95 "
        "targets 1/6 (`bench matrix experiments/mead-tab2.yaml --only autoscaler.name=mead --set "
        "sim.readings=exact`; first guess 1/6, calibrated gauge 0/6). The M/G/1 and Kingman planners read the "
        "same gauge: their mean response time rose from 9.65 s (first guess) to 29.4 s.",
        "Measured on q11's first-guess costs, before its calibrated profile (the tables above are newer): "
        "static's response time 0 is measured, at the simulator's resolution: every 5 s interval of a static "
        "run has records at the sink (360 of 360), and every one of them was taken in the step it arrived in "
        "(busy at most 0.84 of each operator's time: no queue). The simulator counts a record's waiting in "
        "whole 1 s steps and models no per-record service time, so 0 means 'under one step (1 s)', which is "
        "below every target here; it could not judge a sub-second target (the paper's SYNT and BC ones).",
        "Measured on q11's first-guess costs, before its calibrated profile (the tables above are newer; "
        "docs/reproductions/README.md says what moved): "
        "why MEAD misses its mean targets (issue 14, item 5): its inter-arrival buffer spans too "
        "little of the input. MEAD fits MAPs to its last N_E = 50,000 inter-arrival times; at 100 k records/s "
        "the simulator hands it a thinned sample that spans `sim.interarrival_window_s` = 60 s of input "
        "(workloads/arrivals.py), shorter than one cycle of the MMPP (20 s bursts every ~80 s), so many buffers "
        "hold no burst: in the 1.5 s runs 6-7 of 24-25 decisions predicted under 0.75 s (one 0.0003 s), and "
        "MEAD's predictions (median 1.07-1.20 s) sat under the measured means. With the buffer spanning 300 s "
        "(`experiments/mead-buffer-span.yaml`, the setup-check claims above) MEAD meets the 1.5 s target in "
        "3/3 runs (0.63, 1.19, 1.37 s at CPU 0.69; 60 s: 1.94, 2.07, 2.71 s at CPU 0.63). The p95 targets "
        "improve less: 3/6 met with 300 s (p95 3.4, 5.8, 7.3 s for 7 s; 5.0, 12.2, 12.0 s for 10 s) vs 1/6 "
        "with 60 s (`bench matrix experiments/mead-tab2.yaml --only autoscaler.name=mead --set "
        "sim.interarrival_window_s=300 --results DIR`). The paper does "
        "not give its traces' rates, so the span its 50,000 events covered is not known. Not the cause, "
        "measured with `bench matrix experiments/mead-tab1.yaml --only autoscaler.name=mead --only "
        "slo.latency_s=1.5 --set KEY=VALUE --results DIR` (seeds 1-3): the sample's size "
        "(sim.interarrival_sample=50000, the paper's N_E: 1.86, 3.08, 2.99 s, 0/3 met) and the simulator's "
        "step (sim.step_s=0.1: 3.28, 3.68, 0.55 s, 1/3 met, as scattered as at 1 s).",
    ),
    causes=MEAD_CAUSES,
)

# ---------------------------------------------------------------- Flink-ER

_F = "flink-er-static"
FLINK_ER_ = Select("Flink-ER", _F, "flink-er")
ORIGINAL = Select("Original Flink (static)", _F, "static")

_FC = "flink-er-setup-checks"


def _flink_er_checks() -> tuple[Claim, ...]:
    """The latency claim again with one setup choice undone (issue item 5): phi = lc, or a larger pool."""
    def er(phi: float, pool: int) -> Select:
        return Select(f"Flink-ER [phi {phi:g} s, pool {pool}]", _FC, "flink-er", {"phi_s": phi},
                      {"scale_manager.max_taskmanagers": pool})

    claim = "latency back within the constraint where Original Flink's keeps growing"
    paper = "Original > 900 ms and growing; Flink-ER within the limit"
    return (
        Relative(f"setup check, phi 5 s (= lc): {claim}", "sec. 4.2, Fig. 7 (WordCount)", paper,
                 "saso_qos_violation_pct", er(5, 10), ORIGINAL, LOWER),
        Relative(f"setup check, pool of 14: {claim}", "sec. 4.2, Fig. 7 (WordCount)", paper,
                 "saso_qos_violation_pct", er(30, 14), ORIGINAL, LOWER),
        Relative(f"setup check, phi 5 s and pool of 14: {claim}", "sec. 4.2, Fig. 7 (WordCount)", paper,
                 "saso_qos_violation_pct", er(5, 14), ORIGINAL, LOWER),
    )


_FL = "flink-er-load-scaled"
LOAD_SCALE = 1.38  # flink-er-load-scaled.yaml's pattern.scale: the overload starts at ~675 s (see its header)


def _flink_er_load_checks() -> tuple[Claim, ...]:
    """The three claims again with the load scaled to q11's calibrated capacities (flink-er-load-scaled.yaml)."""
    er = Select(f"Flink-ER [load x{LOAD_SCALE:g}]", _FL, "flink-er", {}, {"pattern.scale": LOAD_SCALE})
    static = Select(f"Original Flink (static) [load x{LOAD_SCALE:g}]", _FL, "static", {}, {"pattern.scale": LOAD_SCALE})
    check = f"setup check, load x{LOAD_SCALE:g} (overload from ~675 s, not ~1,190 s)"
    return (
        Relative(f"{check}: latency back within the constraint where Original Flink's keeps growing",
                 "sec. 4.2, Fig. 7 (WordCount)", "Original > 900 ms and growing; Flink-ER within the limit",
                 "saso_qos_violation_pct", er, static, LOWER),
        Relative(f"{check}: higher throughput than Original Flink under rising load", "sec. 4.2, Fig. 8a-10a",
                 "higher (IncrementalLearning: Original < 80,000 tuples/s)", "spec_processed_in_trace",
                 er, static, HIGHER),
        Relative(f"{check}: the backlog (data accumulation) shrinks compared with Original Flink",
                 "sec. 4.2, Fig. 10b", "lower accumulation", "lag_max", er, static, LOWER),
    )


FLINK_ER_CAUSES = {
    "latency back within the constraint where Original Flink's keeps growing":
        "the ramp outgrows the initial allocation only at ~1,190 s of the 1,800 s trace (the paper's WordCount "
        "was rescaled at ~300-480 s, Fig. 7), and Alg. 2 waits until the source lag reaches phi (30 s of "
        "input, the harness' assumption: the paper gives no value): Flink-ER's first rescale comes at "
        "1,575-1,635 s and its backlog has not drained when the trace ends, so its steps over lc are Original "
        "Flink's. Measured: phi 5 s -36 %, overload from ~675 s (load x1.38) -20 %, both partly (three "
        "repetitions, wide intervals); a pool of 14 changes little (-3 %).",
}

FLINK_ER = Paper(
    key="flink-er",
    title="Flink-ER: an elastic resource-scheduling strategy for fluctuating mobile stream data on Flink",
    experiments=("experiments/flink-er-static.yaml", "experiments/flink-er-setup-checks.yaml",
                 "experiments/flink-er-load-scaled.yaml"),
    claims=(
        Relative("latency back within the constraint where Original Flink's keeps growing",
                 "sec. 4.2, Fig. 7 (WordCount)", "Original > 900 ms and growing; Flink-ER within the limit",
                 "saso_qos_violation_pct", FLINK_ER_, ORIGINAL, LOWER),
        Relative("higher throughput than Original Flink under rising load", "sec. 4.2, Fig. 8a-10a",
                 "higher (IncrementalLearning: Original < 80,000 tuples/s)", "spec_processed_in_trace",
                 FLINK_ER_, ORIGINAL, HIGHER),
        Relative("the backlog (data accumulation) shrinks compared with Original Flink", "sec. 4.2, Fig. 10b",
                 "lower accumulation", "lag_max", FLINK_ER_, ORIGINAL, LOWER),
        *_flink_er_checks(),
        *_flink_er_load_checks(),
    ),
    notes=(
        "The load, decided from the paper (2026-11-27): the paper gives no input rates and defines its load by "
        "what the cluster carries - 'We set the input data as a continuous data flow' (WordCount), 'with the "
        "increase in input load, the throughput of the cluster decreases due to a lack of computing "
        "resources' (TwitterSentiment), 'the Original Flink is not capable of processing data regarding the "
        "arrival rate on time, which results in data accumulation and latency increase' "
        "(Streaming-Benchmarks), all sec. 4.2 - while Flink-ER, with 4 standby task managers (sec. 4.1), "
        "brings the latency back within lc. So flink-er-static.yaml's load is set relative to q11's "
        "capacities by the fidelity files' rule (harness.fidelity.scale.scale_for: the peak needs 85 % of "
        "the task-manager budget, 8 of 10), counted on the calibrated profile at 1 CPU: scale_for gives "
        "1.004 and the file's scale 1.0 is in that step (its 330 k peak needs 3 source, 4 window and 1 sink "
        "subtasks; the initial 6 task managers carry ~248 k, the pool of 10 carries the peak); "
        "tests/analysis/test_catalogue.py checks this against the committed profile. The paper-setup rows "
        "above are therefore the main figures. The 'load x1.38' setup check is not the paper's load: it "
        "makes the overload start at ~675 s instead of ~1,190 s of the 1,800 s ramp (the paper's WordCount "
        "was rescaled at ~300-480 s, Fig. 7), at the price of a peak (455 k) that needs 11 task managers, "
        "more than the paper's pool.",
        "Why the latency claim does not reproduce, and why the claims moved with q11's calibrated profile "
        "(measured 2026-11-27 with `bench matrix "
        "experiments/flink-er-static.yaml --workers 1 --results DIR [--set KEY=VALUE]` and "
        "`.venv/bin/python benchmarks/bench_flink_er_violations.py --results DIR/flink-er-static`): Flink-ER "
        "acts as before; Original Flink got better. The calibrated profile gives a session-window subtask "
        "82,847 records/s at 1 CPU (first guess 60,000; the source 135,758 vs 120,000; both extrapolated "
        "from the profile measured at 0.25 CPU, the only quota calibrated), so the initial "
        "allocation carries ~250 k records/s instead of ~180 k and on the 90 k -> 330 k ramp the latency "
        "passes lc at 1,345-1,400 s instead of 755-930 s. Flink-ER's first rescale (when the source lag "
        "reaches phi, 30 s of input) comes at 1,575-1,635 s, and after its two rescales the backlog has not "
        "drained when the trace ends: 27-30 of 120 steps over lc (16-18 before the first rescale, 8 of 8 "
        "during the rescales, 3-6 after) against static's 27-31, the same steps (first guess: 41-58 vs "
        "58-70). Not the warm-up: with sim.taskmanager_warmup=false the violating steps are the same and the "
        "mean latency moves by under 0.2 s (10.2, 9.72, 8.40 -> 10.1, 9.65, 8.26 s); not the readings: "
        "sim.readings=exact gives identical figures (Flink-ER reads the lag, no busy gauge). With the load "
        "scaled by 1.38 = 82,847 / 60,000 (experiments/flink-er-load-scaled.yaml, the 'load x1.38' "
        "setup-check claims) the calibrated runs repeat the first-guess ones step for step: Flink-ER 41 / 58 / "
        "50 violating steps, static 70 / 58 / 59 (first guess 41 / 58 / 46 and 70 / 58 / 59). So the likely "
        "cause is when the ramp outgrows the initial allocation, not Flink-ER's rules: in "
        "flink-er-static.yaml that happens only in the last third of the trace, too late for a scaler that "
        "waits for phi (30 s of input, the harness' assumption; the phi 5 s checks) and then for its "
        "backlog to drain, and Original Flink is over lc only in the last quarter (24 % of the steps) where "
        "the paper's kept growing.",
        "Measured on q11's first-guess costs, before its calibrated profile (the tables above are newer; "
        "docs/reproductions/README.md says what moved): "
        "where the violation time falls, measured on the flink-er-static records with "
        "`.venv/bin/python benchmarks/bench_flink_er_violations.py` (per run: 15 s steps with mean "
        "end-to-end latency over lc = 5 s, by phase). Flink-ER 41 / 58 / 46 of 120 steps: 12-15 before its "
        "first rescale, 8 of 8 between its first rescale and the pool running out, 18-35 after. (1) The "
        "latency passes lc at 755-930 s (input 196-203 k records/s, the initial allocation carries ~180 k), but "
        "Alg. 2 acts only when the source lag reaches phi, which the paper does not give and the harness sets "
        "to 30 s of input: the first rescale comes 180-225 s later (975-1,155 s). (2) Flink-ER's 'enlarge each' "
        "adds a source and a window subtask per step; its third step would need 12 task managers, so the "
        "paper's pool of 10 runs out at 1,095-1,275 s (input 237-253 k records/s) while the load rises to "
        "330 k: from then on nothing can keep the latency within lc. The paper's Flink-ER does bring its "
        "latency back, so its load stayed within its pool. The setup-check claims above "
        "(`experiments/flink-er-setup-checks.yaml`) undo each choice: phi 5 s (= lc) with the paper's pool, "
        "and a pool of 14 with phi 30 s.",
    ),
    causes=FLINK_ER_CAUSES,
)

PAPERS: dict[str, Paper] = {p.key: p for p in (GESSCALE, MPC, MEAD, FLINK_ER)}
