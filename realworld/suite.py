"""Runs realworld cases through ckpt_verify.verify() and turns the judge's
verdicts into table rows (docs/realworld.md) and results.

Each case is one verify() call: its baseline step and every run are wrapped
so that the run's patch variant (realworld.patching) is the selected one
while it trains; a run with `prepare` becomes ckpt_verify.Run(prepare=...,
step=...). A row is expected when its verdict is one of `expect` and, for a
run with `reason_has`, the judge's reason (or error message) contains it.
A case or run that cannot run here is a row with verdict Skipped and the
exact reason."""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any

import ckpt_verify

from . import patching
from .case import Case, RunSpec


@dataclass
class Row:
    """One line of the table, with what the judge said."""

    framework: str
    case: str
    run: str
    implementation: str
    version: str
    model: str
    verdict: str
    expected: str
    why: str
    reason: str
    ok: bool
    known_bug: str | None = None
    fixed_by: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _run_value(spec: RunSpec, variant: str | None, baseline: Any) -> Any:
    step = patching.selecting(spec.step or baseline, variant)
    memory = None if spec.control else "judged"
    if spec.prepare is None:
        return step if memory else ckpt_verify.Run(step=step, memory=None)
    return ckpt_verify.Run(prepare=patching.preparing(spec.prepare, variant), step=step, memory=memory)


def _row(case: Case, spec: RunSpec, verdict: str, reason: str, ok: bool, seconds: float) -> Row:
    return Row(case.framework, case.name, spec.name, spec.implementation, case.version, case.model, verdict,
               spec.expect.replace("|", " or "), spec.why, reason, ok, spec.known_bug, spec.fixed_by, seconds)


def run_case(case: Case, out_dir: str, device: str | None = None) -> list[Row]:
    """Verifies one case; returns a row per run (Skipped rows included)."""
    skip = case.skip
    if skip:
        return [_row(case, spec, "Skipped", skip, True, 0.0) for spec in case.runs]
    live = [spec for spec in case.runs if not spec.skip]
    rows = {spec.name: _row(case, spec, "Skipped", spec.skip, True, 0.0) for spec in case.runs if spec.skip}
    if live:
        baseline = patching.selecting(case.baseline or ckpt_verify.default_baseline, None)
        runs = {spec.name: _run_value(spec, spec.variant, case.baseline or ckpt_verify.default_baseline)
                for spec in live}
        expect = {spec.name: spec.expect for spec in live if spec.expect not in ("PASS", "PASS|NOISE")}
        os.makedirs(out_dir, exist_ok=True)
        start = time.monotonic()
        try:
            if case.setup:
                case.setup()
            report = ckpt_verify.verify(
                case.model_fn, case.batch_fn, runs, baseline=baseline, steps=case.steps, seed=0,
                device=device or case.device, out=os.path.join(out_dir, f"{case.name}.h5"), expect=expect or None,
                tolerance=case.tolerance, noise_runs=case.noise_runs, name=case.name,
                model_definition=f"{case.model} ({case.framework} {case.version})")
        except Exception as e:  # set-up or a baseline raised: every run of the case is an unexpected ERROR
            msg = f"verify() raised {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}"
            for spec in live:
                rows[spec.name] = _row(case, spec, "ERROR", msg, False, time.monotonic() - start)
            return [rows[spec.name] for spec in case.runs]
        finally:
            patching.select(None)
        seconds = (time.monotonic() - start) / max(1, len(live))
        for spec in live:
            v = report.verdicts.get(spec.name)
            verdict = v.verdict if v else "MISSING"
            reason = (v.reason if v else "the judge gave no verdict") or ""
            ok = verdict in spec.expect.split("|")
            if ok and spec.reason_has and spec.reason_has not in reason:
                ok = False
                reason = f"{reason} [expected the reason to contain {spec.reason_has!r}]"
            rows[spec.name] = _row(case, spec, verdict, reason, ok, seconds)
    return [rows[spec.name] for spec in case.runs]
