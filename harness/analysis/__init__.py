"""Analysis of run records: metric core (pure), per-run summaries (pandas and PySpark),
per-cell aggregates over repetitions, comparison tables, and the `analyze`/`report` commands.

Layers, imports flowing one way:
  metrics (pure maths) <- profile/meta (run.yaml -> typed facts) <- events (small per-run tables)
  <- pandas_engine / spark_jobs (the heavy per-run aggregation) <- aggregate <- tables <- commands.
"""
