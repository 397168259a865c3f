"""ckpt_verify: does your activation checkpoint give the same gradients as
the plain step, and how much memory does it save? Bring a model, a batch
and a checkpointed step; the verdicts come from the C harness's judge.

    import ckpt_verify
    report = ckpt_verify.verify(model_fn, batch_fn, {"mine": my_step,
                                "hf": ckpt_verify.Run(prepare=enable_checkpointing)})
    report["mine"]  # "PASS", "NOISE", "FAIL", "MEMFAIL" or "ERROR"

Package layout (docs/architecture.md): frontends/ train runs (eager: a
user's model; harness_twin: the harness's models in torch), recorder.py
streams them into the report schema (schema.py), judge.py asks the C judge;
frontends/jax.py verifies jax.checkpoint the same way (docs/xla.md).

See docs/external.md."""
import importlib.util

from .errors import (
    BadInput,
    BadRunName,
    CheckpointInBaseline,
    JudgeError,
    MissingFrontend,
    ModelNotReproducible,
    NameCollision,
    NonScalarLoss,
    ReportNotWritable,
    RunError,
    VerificationFailed,
    VerifyError,
)
from .judge import Verdict, find_judge
from .report import Report

__all__ = ["Report", "Verdict", "find_judge",
           "VerifyError", "BadInput", "NonScalarLoss", "ModelNotReproducible", "NameCollision", "BadRunName",
           "RunError", "JudgeError", "VerificationFailed", "CheckpointInBaseline", "MissingFrontend",
           "ReportNotWritable"]

# The torch API. The JAX environment (env/jax-requirements.txt) has no
# torch: there the package is the recorder, the schema, the judge and the
# JAX frontend (frontends/jax.py) only.
if importlib.util.find_spec("torch") is not None:
    from .adapters import Skipped
    from .frontends.distributed import DistRun, rank_context
    from .frontends.eager import Run
    from .verify import assert_verified, default_baseline, verify

    __all__ += ["verify", "assert_verified", "default_baseline", "Run", "DistRun", "rank_context", "Skipped"]
