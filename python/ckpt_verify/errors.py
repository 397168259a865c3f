"""Exceptions of ckpt_verify. BadInput and its subclasses mean "your
inputs are wrong, nothing was written" (the CLI exits 2); JudgeError means
the C judge could not give verdicts (exit 3); RunError means a run itself
raised (exit 1, like the harness's ERROR verdict)."""


class VerifyError(Exception):
    """Base of every error ckpt_verify raises on purpose."""


class BadInput(VerifyError):
    """Inputs that cannot be verified; raised before anything is written."""


class NonScalarLoss(BadInput):
    """A step_fn returned something other than a 0-dim floating tensor that requires grad."""


class ModelNotReproducible(BadInput):
    """model_fn built a model that differs (names, shapes, dtypes or values) from its first one."""


class BadRunName(BadInput):
    """A run name the report cannot hold: reserved (baseline_*, *_rerun_*), empty or not a word."""


class RunError(VerifyError):
    """A run raised while training; the message names the run and the step."""


class JudgeError(VerifyError):
    """`ckpt-verify judge` is missing, failed, or its summary could not be read."""


class VerificationFailed(AssertionError):
    """assert_verified: a verdict was not the expected one (an AssertionError, for pytest)."""
