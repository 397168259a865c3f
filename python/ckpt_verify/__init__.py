"""ckpt_verify: does your activation checkpoint give the same gradients as
the plain step, and how much memory does it save? Bring a model, a batch
and a checkpointed step; the verdicts come from the C harness's judge.

    import ckpt_verify
    report = ckpt_verify.verify(model_fn, batch_fn, {"mine": my_step}, baseline=plain_step)
    report["mine"]  # "PASS", "NOISE", "FAIL" or "MEMFAIL"

See docs/external.md."""
from .adapters import Skipped
from .errors import (
    BadInput,
    BadRunName,
    JudgeError,
    ModelNotReproducible,
    NameCollision,
    NonScalarLoss,
    RunError,
    VerificationFailed,
    VerifyError,
)
from .judge import Verdict, find_judge
from .verify import Report, assert_verified, default_baseline, verify

__all__ = ["verify", "assert_verified", "default_baseline", "Report", "Verdict", "Skipped", "find_judge",
           "VerifyError", "BadInput", "NonScalarLoss", "ModelNotReproducible", "NameCollision", "BadRunName",
           "RunError", "JudgeError", "VerificationFailed"]
