"""Frontends: one module per way of running a model. A frontend only
trains runs and hands their tensors to the recorder (recorder.py): step by
step to a RunWriter (eager, xla), or as a finished RunRecord (the small
twin and distributed runs); it decides no verdict (the C judge does).

  eager         a user's torch model, eager mode (verify())
  harness_twin  the harness's own models rebuilt in torch from a report
                (torch_crosscheck, external_torch, bench_vs_torch)
  probe         the recompute probe that proves a baseline plain"""
