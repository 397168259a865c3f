"""verify(baselines=...) refuses, before training or as soon as its own
baseline shows it, what it could not judge: a run against a family that
was not given, a family named like the built-in baselines, an expected
run whose twin's name /case expect cannot hold, and a compiled family
whose plain step checkpoints (proven by torch.compile's own joint graph,
CheckpointInBaseline); and a run against a family whose prepare raises
is an ERROR, and so is its _vs_eager twin (not judged). Exit 0 when each holds, 1
naming the one that did not."""
import sys
import tempfile

import compile_cases as cc
import torch

import ckpt_verify
from ckpt_verify.errors import BadInput, BadRunName, CheckpointInBaseline

R = ckpt_verify.Run


def model_fn():
    return cc.Net(0.0)


def batch_fn(step):
    return torch.randn(2, 4, cc.HIDDEN), torch.randn(2, 4, cc.HIDDEN)


def refused(what, error, **kwargs):
    with tempfile.TemporaryDirectory() as tmp:
        try:
            ckpt_verify.verify(model_fn, batch_fn, out=f"{tmp}/r.h5", steps=1, noise_runs=0, **kwargs)
        except error as e:
            print(f"ok: {what}: {type(e).__name__}: {e}")
            return True
        except Exception as e:  # noqa: BLE001 - the wrong error is the finding
            print(f"FAIL {what}: raised {type(e).__name__}: {e}, not {error.__name__}", file=sys.stderr)
            return False
    print(f"FAIL {what}: not refused", file=sys.stderr)
    return False


def broken(model):
    raise ValueError("planted: prepare raises")


def error_reaches_the_twin():
    with tempfile.TemporaryDirectory() as tmp:
        report = ckpt_verify.verify(model_fn, batch_fn, {"broken": R(prepare=broken, against="compiled")},
                                    baselines={"compiled": R(prepare=cc.compiled())}, out=f"{tmp}/r.h5", steps=1,
                                    noise_runs=0, expect={"broken": "ERROR"})
        got = {run: v.verdict for run, v in report.verdicts.items()}
        twin = report.verdicts.get("broken_vs_eager")
    # The twin takes no expectation from its run: it is not judged.
    if got == {"broken": "ERROR", "broken_vs_eager": "ERROR"} and report.ok and \
            twin.reason.startswith("not judged: broken is itself ERROR against compiled_baseline_0 (expected)"):
        print(f"ok: a run that raises is ERROR, and so is its twin, not judged: {got}")
        return True
    print(f"FAIL a run that raises: verdicts {got}, expected broken and broken_vs_eager ERROR, the twin not judged: "
          f"{twin.reason if twin else 'no twin'}", file=sys.stderr)
    return False


def main():
    ckpt = R(prepare=cc.then(cc.checkpointed, cc.compiled()), against="compiled")
    results = [
        refused("against a family not given", BadInput, runs={"mine": ckpt}),
        refused("a family named 'baseline'", BadRunName, runs={"mine": R(prepare=cc.compiled(), against="baseline")},
                baselines={"baseline": R(prepare=cc.compiled())}),
        refused("an expected run whose twin's name is too long for /case expect", BadRunName,
                runs={"a_rather_long_name_for_a_run": R(prepare=cc.compiled(), against="compiled")},
                baselines={"compiled": R(prepare=cc.compiled())}, expect={"a_rather_long_name_for_a_run": "FAIL"}),
        refused("a compiled family whose step checkpoints", CheckpointInBaseline, runs={"mine": ckpt},
                baselines={"compiled": R(prepare=cc.then(cc.checkpointed, cc.compiled()))}),
        error_reaches_the_twin(),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
