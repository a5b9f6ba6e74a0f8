"""What a summary column is called on a figure, and its unit (METRICS.md names the metrics).

Known columns are listed; a column added to the summary later gets a unit from its name
(`*latency*` / `*_s` seconds, `*_pct` percent, `*rate*` / `throughput*` records per second), so a
new column is labelled sensibly without a change here.
"""

from __future__ import annotations

KNOWN: dict[str, tuple[str, str]] = {
    "tm_avg": ("task managers, time-weighted mean", "task managers"),
    "tm_max": ("task managers, max", "task managers"),
    "latency_kafka_avg": ("latency (time in Kafka), mean", "s"),
    "latency_kafka_p50": ("latency (time in Kafka), p50", "s"),
    "latency_kafka_p95": ("latency (time in Kafka), p95", "s"),
    "latency_kafka_max": ("latency (time in Kafka), max", "s"),
    "latency_e2e_avg": ("latency (end to end), mean", "s"),
    "latency_e2e_p50": ("latency (end to end), p50", "s"),
    "latency_e2e_p95": ("latency (end to end), p95", "s"),
    "latency_e2e_max": ("latency (end to end), max", "s"),
    "input_rate_avg": ("input rate, mean", "records/s"),
    "throughput_avg": ("throughput, mean", "records/s"),
    "throughput_ratio": ("throughput / input rate", "ratio"),
    "load_shortfall": ("load shortfall", "fraction of the pattern's records"),
    "load_skipped": ("records skipped by the generator", "records"),
    "load_expired": ("records expired unread", "records"),
    "cpu_avg": ("task-manager CPU load, mean", "CPU load"),
    "lag_max": ("consumer lag, max", "records"),
    "lag_end": ("consumer lag at the end", "records"),
    "scale_count": ("scaling actions", "actions"),
    "decisions_skipped": ("decisions skipped (unmeasured inputs)", "decisions"),
    "duration_s": ("run length", "s"),
    "spec_accuracy_u": ("SPEC accuracyU (under-provisioning)", "task managers"),
    "spec_accuracy_o": ("SPEC accuracyO (over-provisioning)", "task managers"),
    "spec_timeshare_u": ("SPEC timeshareU", "% of time"),
    "spec_timeshare_o": ("SPEC timeshareO", "% of time"),
    "spec_excess_time": ("SPEC excess time (Pt - It) / T", "fraction of the trace"),
    "spec_processed_in_trace": ("records processed within the trace", "fraction of the offered records"),
    "spec_trace_s": ("trace length T", "s"),
    "spec_reconfigurations": ("SPEC reconfigurations", "reconfigurations"),
    "spec_cost_replica_min": ("cost (task-manager minutes up to Pt)", "replica-minutes"),
    "spec_ideal_avg": ("ideal task managers, mean", "task managers"),
    "saso_reconfigurations": ("SASO stability: reconfigurations", "reconfigurations"),
    "saso_qos_violations": ("SASO QoS violations", "control steps"),
    "saso_control_steps": ("control steps", "steps"),
    "saso_qos_violation_pct": ("SASO QoS violations", "% of control steps"),
    "saso_violations_in_rescale_steps": ("SASO QoS violations in steps with a rescale", "control steps"),
    "alloc_cores_avg": ("allocated cores (parallelism x CPU share), mean", "cores"),
    "saso_amplitude": ("SASO settling: amplitude", "task managers per reconfiguration"),
    "saso_overshoot": ("SASO overshoot: mean resources", "task managers"),
    "saso_overshoot_vs_ideal": ("SASO overshoot vs ideal", "task managers"),
    "mead_rt_mean": ("MEAD per-record response time, mean", "s"),
    "mead_rt_p95": ("MEAD per-record response time, p95", "s"),
    "mead_rt_target": ("MEAD response-time target", "s"),
    "mead_rt_ratio": ("MEAD response time (the target's statistic) / target", "ratio"),
    "mead_target_met": ("MEAD target met", "share of runs"),
    "mead_cpu_share": ("MEAD CPU share per task manager", "CPU share"),
    "faults": ("faults recorded", "faults"),
    "injected_faults": ("faults injected", "faults"),
    "crashes": ("crashes", "crashes"),
    "failed_rescales": ("failed rescales", "rescales"),
    "recoveries": ("recoveries", "recoveries"),
    "failed": ("failed runs", "share of runs"),
    "flagged": ("flagged runs", "share of runs"),
    "crashed": ("crashed runs", "share of runs"),
}


def label_of(column: str) -> tuple[str, str]:
    """(title, unit) of a summary column."""
    if column in KNOWN:
        return KNOWN[column]
    title = column.replace("_", " ")
    if column.startswith("latency_"):
        what = "end to end" if "e2e" in column else "time in Kafka" if "kafka" in column else ""
        stat = column.rsplit("_", 1)[-1]
        stat = "mean" if stat == "avg" else stat
        return (f"latency ({what}), {stat}" if what else title), "s"
    if column.endswith("_s") or "latency" in column:
        return title, "s"
    if column.endswith("_pct"):
        return title, "%"
    if "rate" in column or column.startswith("throughput"):
        return title, "records/s"
    return title, ""


def axis_label(column: str) -> str:
    title, unit = label_of(column)
    return f"{title} ({unit})" if unit else title
