"""The `realworld` suite: checkpoints that people ship, verified through
ckpt_verify.verify() and the C judge (docs/realworld.md).

A framework module (torch_cases, transformers_cases, ...) exposes
`cases() -> list[Case]`. A Case is one verify() call: one model, its
batches, a plain baseline step and several runs; each RunSpec names the
implementation it exercises, the verdict it must get and why. A known-bug
run reproduces a real bug of that project (cited by issue or PR) by a small
patch around the real library (realworld.patching), next to its fixed
version, which must PASS.

Contract: importing this package imports no framework; `cases()` of a
framework whose package is missing still returns its cases, each Skipped
with the exact reason (never absent)."""
from .case import FRAMEWORKS, Case, RunSpec, load_cases

__all__ = ["Case", "RunSpec", "FRAMEWORKS", "load_cases"]
