"""The `sim` backend: a deterministic model of Kafka + a Flink job."""
