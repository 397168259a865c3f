#!/usr/bin/env python3
"""Writes crafted report files for `ckpt-verify judge`, with h5py only (no
harness code), as another framework would:

  noise.h5      three baselines whose racing dbias flips the sign of
                near-zero bias-gradient elements (element-wise ~2^31 ULP
                apart) and moves others by an ULP; `noisy` has the same kind
                of noise (NOISE), `moved` moves one weight-gradient element
                by 1e-4 relative on top of it (FAIL, declared expected)
  bitwise.h5    bitwise baselines; `one_ulp` moves one weight element by one
                ULP (FAIL: a tensor whose baselines agree must match)
  outcome.h5    a run that recorded outcome=error (ERROR)
  flaky.h5      bitwise baselines; `flaky` moves one weight-gradient
                element ~2.9e6 ULP at the tensor's scale and its re-run
                `flaky_rerun_1` reproduces baseline_0 (FAIL: every attempt
                must lie inside the envelope)
  attempts.h5   the noise.h5 baselines; `noisy` and its re-run both within
                (NOISE), `moved_once` outside in its run and within in its
                re-run (FAIL, "differs in 1 of 2 attempts")
  undeclared.h5 noise.h5 without the expectation (exit 1)
  no_baseline.h5, no_loss.h5, bad_case.h5: bad input (exit 2)

Completeness (a report that cannot pass half-done):
  baselines_only.h5  baseline_0 and baseline_1, nothing else named or held
  absent.h5          /case impls names `lost`, which the file lacks
  expect_absent.h5   /case expect names `gone:PASS`, which the file lacks
  runs_absent.h5     python/ckpt_verify's way: no impls, /case runs names
                     `same,unfinished`; the file lacks `unfinished`
  cut.h5             `cut` stopped in step 2 (as a SIGINT leaves a .tmp):
                     step 2's loss and l0.bias, no l0.weight, no final_params
  dropped_grad.h5    `dropped` holds every step and final parameter but never
                     l0.bias's gradient: a run that dropped it (FAIL), not a
                     cut report
  baseline_cut.h5    baseline_1 stopped after step 1 (bad input, exit 2)
  error_no_message.h5 a run with outcome=error and no message

Completeness against /case steps (every run, baselines included):
  steps_short.h5     /case steps = 2, every run holds step 1 only
  steps_five.h5      /case steps = 5, every run holds 2 steps
  baseline_short.h5  /case steps = 2, baseline_0 and baseline_1 hold step 1
                     only, `whole` holds both steps
  params_short.h5    /params_init names l0.weight and l0.bias, every run
                     holds final_params/l0.weight only

usage: make_judge_files.py OUT_DIR
"""
import os
import sys

import h5py
import numpy as np

N = 64


def base_grads(rng):
    w = rng.uniform(-0.08, 0.08, N).astype(np.float32)
    b = rng.uniform(-0.05, 0.05, N).astype(np.float32)
    w[17] = 0.07  # the element `moved` moves, of ordinary size
    b[3], b[7], b[11] = 1e-9, -2e-9, 3e-10
    return {"loss": np.float32(0.75), "l0.weight": w, "l0.bias": b}


def noisy(g, seed):
    """The same gradients after another order of the racing reduction."""
    r = np.random.default_rng(seed)
    out = {k: np.array(v, copy=True) for k, v in g.items()}
    b = out["l0.bias"]
    for i in (3, 7, 11):
        b[i] = -b[i] * np.float32(1 + 0.1 * seed)
    for i in r.choice(N, 6, replace=False):
        b[i] = np.nextafter(b[i], np.float32(1))
    w = out["l0.weight"]
    for i in r.choice(N, 4, replace=False):
        w[i] = np.nextafter(w[i], np.float32(-1))
    return out


def write_run(f, name, steps, outcome=None):
    grp = f.create_group(f"runs/{name}")
    for k, g in enumerate(steps, start=1):
        grp.create_dataset(f"steps/{k}/loss", data=g["loss"])
        for p in ("l0.bias", "l0.weight"):
            grp.create_dataset(f"steps/{k}/grads/{p}", data=g[p])
    grp.create_dataset("final_params/l0.weight", data=steps[-1]["l0.weight"] * np.float32(0.99))
    grp.create_group("memory").attrs["peak_bytes"] = 1000
    grp.create_group("timing").attrs["step_ms"] = 1.0
    if outcome:
        grp.attrs["outcome"], grp.attrs["message"] = outcome


def cut_after(f, name, keep):
    """Deletes from run `name` every tensor after the first `keep`, in the
    order a writer writes them (steps in order, loss first, then grads by
    name; final_params last): what a run stopped mid-write leaves."""
    grp = f[f"runs/{name}"]
    order = []
    steps = sorted(grp["steps"], key=int)
    for k in steps:
        order.append(f"steps/{k}/loss")
        order += [f"steps/{k}/grads/{p}" for p in sorted(grp[f"steps/{k}/grads"])]
    order += [f"final_params/{p}" for p in sorted(grp["final_params"])]
    for path in order[keep:]:
        del grp[path]


def new_file(path, case, expect=None, tolerance=None):
    f = h5py.File(path, "w")
    f.attrs["schema_version"] = 1
    f.attrs["case"] = case
    f.attrs["device"] = "cpu"
    c = f.create_group("case")
    c.attrs["model_definition"] = "crafted: one linear layer's gradients"
    c.attrs["framework"] = "numpy"
    if expect:
        c.attrs["expect"] = expect
    if tolerance is not None:
        c.attrs["tolerance"] = tolerance
    return f


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    g1, g2 = base_grads(rng), base_grads(rng)

    for name, expect in (("noise", "moved:FAIL"), ("undeclared", None)):
        with new_file(os.path.join(out, f"{name}.h5"), f"crafted_{name}", expect) as f:
            write_run(f, "baseline_0", [g1, g2])
            write_run(f, "baseline_1", [noisy(g1, 1), noisy(g2, 1)])
            write_run(f, "baseline_2", [noisy(g1, 2), noisy(g2, 2)])
            write_run(f, "noisy", [noisy(g1, 3), noisy(g2, 3)])
            moved = noisy(g2, 4)
            moved["l0.weight"][17] *= np.float32(1 + 1e-4)
            write_run(f, "moved", [noisy(g1, 4), moved])

    with new_file(os.path.join(out, "bitwise.h5"), "crafted_bitwise", "one_ulp:FAIL") as f:
        write_run(f, "baseline_0", [g1, g2])
        write_run(f, "baseline_1", [g1, g2])
        write_run(f, "same", [g1, g2])
        off = {k: np.array(v, copy=True) for k, v in g2.items()}
        off["l0.weight"][5] = np.nextafter(off["l0.weight"][5], np.float32(1))
        write_run(f, "one_ulp", [g1, off])

    # A flaky checkpoint: wrong in one attempt, right in the next.
    with new_file(os.path.join(out, "flaky.h5"), "crafted_flaky", "flaky:FAIL") as f:
        write_run(f, "baseline_0", [g1, g2])
        write_run(f, "baseline_1", [g1, g2])
        off = {k: np.array(v, copy=True) for k, v in g2.items()}
        off["l0.weight"][17] += np.float32(0.0216)
        write_run(f, "flaky", [g1, off])
        write_run(f, "flaky_rerun_1", [g1, g2])

    with new_file(os.path.join(out, "attempts.h5"), "crafted_attempts", "moved_once:FAIL") as f:
        write_run(f, "baseline_0", [g1, g2])
        write_run(f, "baseline_1", [noisy(g1, 1), noisy(g2, 1)])
        write_run(f, "baseline_2", [noisy(g1, 2), noisy(g2, 2)])
        write_run(f, "noisy", [noisy(g1, 3), noisy(g2, 3)])
        write_run(f, "noisy_rerun_1", [noisy(g1, 5), noisy(g2, 5)])
        moved = noisy(g2, 4)
        moved["l0.weight"][17] *= np.float32(1 + 1e-4)
        write_run(f, "moved_once", [noisy(g1, 4), moved])
        write_run(f, "moved_once_rerun_1", [noisy(g1, 6), noisy(g2, 6)])

    with new_file(os.path.join(out, "outcome.h5"), "crafted_outcome", "crashed:ERROR") as f:
        write_run(f, "baseline_0", [g1])
        write_run(f, "crashed", [g1], outcome=("error", "CUDA out of memory in recompute"))

    with new_file(os.path.join(out, "no_baseline.h5"), "crafted_no_baseline") as f:
        write_run(f, "reference", [g1])
        write_run(f, "mine", [g1])

    with new_file(os.path.join(out, "no_loss.h5"), "crafted_no_loss") as f:
        write_run(f, "baseline_0", [g1])
        write_run(f, "mine", [g1])
        del f["runs/mine/steps/1/loss"]

    with new_file(os.path.join(out, "bad_case.h5"), "crafted_bad_case", tolerance="a lot") as f:
        write_run(f, "baseline_0", [g1])
        write_run(f, "mine", [g1])

    with new_file(os.path.join(out, "baselines_only.h5"), "crafted_baselines_only") as f:
        write_run(f, "baseline_0", [g1, g2])
        write_run(f, "baseline_1", [g1, g2])
    for name, attr, value in (("absent", "impls", "same,lost"), ("expect_absent", "expect", "gone:PASS"),
                              ("runs_absent", "runs", "same,unfinished")):
        with new_file(os.path.join(out, f"{name}.h5"), f"crafted_{name}") as f:
            f["case"].attrs[attr] = value
            if attr == "runs":
                f.attrs["producer"] = "ckpt_verify (python)"
            write_run(f, "baseline_0", [g1, g2])
            write_run(f, "baseline_1", [g1, g2])
            write_run(f, "same", [g1, g2])
    with new_file(os.path.join(out, "cut.h5"), "crafted_cut") as f:
        f["case"].attrs["impls"] = "same,cut"
        for run in ("baseline_0", "baseline_1", "same", "cut"):
            write_run(f, run, [g1, g2])
        cut_after(f, "cut", 5)  # steps/1 (3), steps/2/loss, steps/2/grads/l0.bias
    with new_file(os.path.join(out, "dropped_grad.h5"), "crafted_dropped_grad", "dropped:FAIL") as f:
        for run in ("baseline_0", "baseline_1", "dropped"):
            write_run(f, run, [g1, g2])
        for k in (1, 2):
            del f[f"runs/dropped/steps/{k}/grads/l0.bias"]
    with new_file(os.path.join(out, "baseline_cut.h5"), "crafted_baseline_cut") as f:
        for run in ("baseline_0", "baseline_1", "same"):
            write_run(f, run, [g1, g2])
        cut_after(f, "baseline_1", 3)
    with new_file(os.path.join(out, "error_no_message.h5"), "crafted_error_no_message") as f:
        write_run(f, "baseline_0", [g1])
        write_run(f, "crashed", [g1])
        f["runs/crashed"].attrs["outcome"] = "error"

    for name, steps, held, whole in (("steps_short", 2, [g1], None), ("steps_five", 5, [g1, g2], None),
                                     ("baseline_short", 2, [g1], [g1, g2])):
        with new_file(os.path.join(out, f"{name}.h5"), f"crafted_{name}") as f:
            f["case"].attrs["steps"] = steps
            for run in ("baseline_0", "baseline_1", "same"):
                write_run(f, run, held)
            if whole:
                write_run(f, "whole", whole)
    with new_file(os.path.join(out, "params_short.h5"), "crafted_params_short") as f:
        f["case"].attrs["steps"] = 2
        f.create_dataset("params_init/l0.weight", data=g1["l0.weight"])
        f.create_dataset("params_init/l0.bias", data=g1["l0.bias"])
        for run in ("baseline_0", "baseline_1", "same"):
            write_run(f, run, [g1, g2])


if __name__ == "__main__":
    main()
