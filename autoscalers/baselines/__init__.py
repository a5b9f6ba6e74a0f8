"""The seed papers' baselines: the autoscalers Gesscale, MPC and MEAD were compared against.

- `thresholds`: THR-NLUnaware / THR-NLAware (Gesscale sec. V-A), the MPC paper's rule-based
  scaler (sec. 5.4) and MEAD's threshold-based vertical policy (sec. VII);
- `spl`: the SPL strategy of Gedik et al., the MPC paper's third reactive baseline (sec. 5.4);
- `gesscale_model`: MDL-NLUnaware, Gesscale on the latency-unaware model (sec. V-A);
- `mead_models`: MEAD's planner on M/G/1 and GI/G/1 (Kingman) queues (sec. VII).

`config` is light (validating an experiment imports only it); the rest loads on use. `static`
(autoscalers.static) is the fixed-allocation baseline.
"""
