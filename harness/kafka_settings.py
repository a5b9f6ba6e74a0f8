"""Kafka as the experiment sets it up, the same on every backend: partitions per topic and retention.

The thesis (Kanis 2023, ch. 6.3.1) set the partitions of each topic to the most consumers the setup
can have (the maximum number of task managers) and a retention time of five minutes, checked every
five seconds, so no record waits in Kafka longer than that: an upper bound on latency, and the
records that expire are load the job never saw (counted as `expired_total`, part of the load
shortfall). `partitions: null` follows the thesis' rule; `retention_s: null` keeps everything.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class KafkaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partitions: PositiveInt | None = Field(
        None, description="partitions per topic; null = scale_manager.max_taskmanagers (thesis ch. 6.3.1)")
    retention_s: PositiveFloat | None = Field(
        None, description="records older than this are deleted (thesis: 300 s); null = kept for the run")
    retention_check_s: PositiveFloat = Field(5.0, description="how often the broker deletes (thesis: 5 s)")
    segment_s: PositiveFloat = Field(
        10.0, description="log segment roll time: Kafka deletes whole closed segments, so a record can outlive "
                          "the retention by up to a segment plus a check interval")

    def resolved_partitions(self, max_taskmanagers: int) -> int:
        return int(self.partitions if self.partitions is not None else max_taskmanagers)
