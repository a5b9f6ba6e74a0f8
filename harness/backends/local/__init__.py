"""The `local` backend: real Kafka, Flink and Prometheus processes on 127.0.0.1."""
