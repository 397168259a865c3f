"""Exceptions of ckpt_verify. BadInput and its subclasses mean "your
inputs (or the place given for the report) cannot be verified, nothing was
left behind" (the CLI exits 2); JudgeError means the C judge could not give
verdicts (exit 3). A checkpointed run that raises is not an exception of
verify(): it is recorded with outcome=error and judged ERROR, as the
harness does; only a baseline that raises stops verify() with RunError
(nothing written; the CLI exits 2). Every message is one line that says
what and where; `.traceback`, where set, is the full Python traceback of
the user's code that raised (`python -m ckpt_verify --verbose` prints it)."""


class VerifyError(Exception):
    """Base of every error ckpt_verify raises on purpose."""

    traceback: str | None = None


class BadInput(VerifyError):
    """Inputs that cannot be verified; raised before anything is written."""


class NonScalarLoss(BadInput):
    """A step_fn returned something other than a 0-dim floating tensor that requires grad."""


class ModelNotReproducible(BadInput):
    """model_fn built a model that differs (names, shapes, dtypes or values) from its first one."""


class BadRunName(BadInput):
    """A run name the report cannot hold: reserved (baseline_*, *_rerun_*), empty or not a word."""


class NameCollision(BadInput):
    """Two parameter or buffer names that the report would store at one path
    (a name with '/' nests: 'stats/mean' puts a group where a buffer 'stats' is)."""


class CannotRebuild(BadInput):
    """A harness report whose case the torch twin (frontends/harness_twin.py)
    does not rebuild: an unknown model, policy or parameter, or a
    model_definition that is not the model rebuilt there."""


class CheckpointInBaseline(BadInput):
    """The baseline recomputed (or handed its saved tensors to hooks): a
    checkpoint was applied inside model_fn or the baseline step, so the
    baseline is not plain. Give the checkpoint as a run (Run(prepare=...))."""


class MissingFrontend(BadInput):
    """The framework a device or frontend needs is not installed in this
    Python (device='xla' needs torch_xla, verify_jax needs jax): the message
    names the script of the environment that has it (scripts/python-xla,
    scripts/python-jax)."""


class ReportNotWritable(BadInput):
    """The report cannot be written where out= points: a read-only or full
    file system, a file size limit (RLIMIT_FSIZE, `ulimit -f`), no
    permission. Room is reserved before each write (recorder.py), so this is
    raised before HDF5 meets the full disk; the temporary file is removed
    and a previous report at the path is left as it was."""


class RunError(VerifyError):
    """A run raised while training; the message names the run and the step,
    .traceback holds the full traceback of what raised (or None).
    Raised out of verify() only for a baseline (the plain step must run)."""


class JudgeError(VerifyError):
    """`ckpt-verify judge` is missing, failed, or its summary could not be read."""


class VerificationFailed(AssertionError):
    """assert_verified: a verdict was not the expected one (an AssertionError, for pytest)."""
