"""Case and RunSpec: what one realworld verification is made of.

A Case is one ckpt_verify.verify() call (a model, its batches, a plain
baseline and the runs to judge); a RunSpec is one row of the table in
docs/realworld.md: implementation, version, model, expected verdict and
why. `skip` (a Case's or a run's) is the exact reason it cannot run here;
a skipped run is still a row."""
from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

StepFn = Callable[[Any, Any], Any]
Prepare = Callable[[Any], Any]

# Framework name -> module under realworld/, in the table's order.
FRAMEWORKS = {
    "torch": "realworld.torch_cases",
    "transformers": "realworld.transformers_cases",
    "fairscale": "realworld.fairscale_cases",
    "deepspeed": "realworld.deepspeed_cases",
    "megatron": "realworld.megatron_cases",
    "transformer_engine": "realworld.te_cases",
}


def package_version(dist: str) -> str:
    """The installed version of a distribution, or 'not installed'."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@dataclass
class RunSpec:
    """One run of a case. `step` None means the case's baseline step;
    `prepare(model) -> model | None` transforms each freshly built model
    (ckpt_verify.Run). `expect` is a verdict or several joined by '|';
    `reason_has`, when given, must appear in the judge's reason (a known
    bug's verdict must point at its cause). `variant` names the patch set
    (realworld.patching) active while this run trains. `known_bug` cites
    the upstream issue/PR a bug version reproduces; `fixed_by` names the
    run that is its fixed version. `control`: a run that checkpoints
    nothing on purpose (a compiled plain model beside the eager one): its
    memory is not judged (ckpt_verify.Run(memory=None))."""

    name: str
    implementation: str
    why: str
    step: StepFn | None = None
    prepare: Prepare | None = None
    expect: str = "PASS"
    reason_has: str | None = None
    variant: str | None = None
    known_bug: str | None = None
    fixed_by: str | None = None
    skip: str | None = None
    control: bool = False


@dataclass
class Case:
    """One verify() call. `package` is the distribution whose version the
    table reports; `skip` (exact reason) skips every run of the case."""

    name: str
    framework: str
    package: str
    model: str
    model_fn: Callable[[], Any] | None
    batch_fn: Callable[[int], Any] | None
    baseline: StepFn | None
    runs: list[RunSpec] = field(default_factory=list)
    steps: int = 2
    tolerance: float | None = None
    noise_runs: int = 2
    device: str = "cpu"
    skip: str | None = None
    setup: Callable[[], None] | None = None

    @property
    def version(self) -> str:
        return package_version(self.package)


def load_cases(frameworks: list[str] | None = None) -> list[Case]:
    """Every case of the named frameworks (all by default), in table order."""
    out: list[Case] = []
    for fw in frameworks or list(FRAMEWORKS):
        if fw not in FRAMEWORKS:
            raise KeyError(f"unknown framework {fw!r} (known: {', '.join(FRAMEWORKS)})")
        out.extend(importlib.import_module(FRAMEWORKS[fw]).cases())
    return out
