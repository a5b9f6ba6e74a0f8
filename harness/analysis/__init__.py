"""Analysis of run records: metric core (pure), per-run summaries (pandas and PySpark),
per-cell aggregates over repetitions and comparison tables (the commands that show them: `harness.report`).

Layers, imports flowing one way:
  metrics (pure maths) <- profile/meta (run.yaml -> typed facts) <- events (small per-run tables)
  <- pandas_engine / spark_jobs (the heavy per-run aggregation) <- aggregate <- tables.
"""
