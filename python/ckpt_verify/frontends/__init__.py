"""Frontends: one module per way of running a model. A frontend only
trains runs and hands each finished run to the recorder (recorder.py) as a
RunRecord; it decides no verdict (the C judge does).

  eager         a user's torch model, eager mode (verify())
  harness_twin  the harness's own models rebuilt in torch from a report
                (torch_crosscheck, external_torch, bench_vs_torch)
  probe         the recompute probe that proves a baseline plain"""
