#!/usr/bin/env python3
"""Side-by-side benchmark: the same model, parameters and inputs trained by
ckpt-verify and by PyTorch (torch.utils.checkpoint), in one command on this
machine: step time and peak bytes for none, reentrant and non-reentrant, and
the ratios ours / torch, as a median over interleaved repeats with its
spread.

    bench_vs_torch.py [--case bench_mlp] [--quick] [--repeats R] [--steps N] [--threads N]

Repeats are interleaved, ours, torch, ours, torch, ...: one repeat is one
ckpt-verify process (each run `steps` steps, median taken) followed by the
same runs in torch here, so a slow spell of a shared machine lands on both
sides of a repeat instead of on one side of the comparison. Each repeat
gives one ratio ours / torch per run; the table shows the median ratio, its
interquartile range and its min-max over the repeats, and each side's median
step time with its min-max. Time is shown twice: the step's process CPU
time (both sides pin one intra-op and BLAS thread by default, so it is the
step's work, however long other processes held the cores) and its wall
time, which on a loaded machine mostly measures the load.

Both sides are measured by the same allocator: the harness's counting CPU
allocator (harness/aten/aten.h) is loaded into this Python process from
libckpt_aten.so and installed before torch makes its first tensor, so a
"peak byte" means the same thing on both sides (live bytes at the highest
point of forward + backward, minus those live when the step started). The
harness's numbers come from its HDF5 report (/runs/<run>/memory and
/timing); torch's are taken here around the same step. Step time is the
median over the run's steps (forward + loss + backward, no SGD update), on
both sides, none of them recorded but the harness's first (--steps 1
--repeats N); the harness's `none` is its second baseline (the first pays
the process's warm-up), and torch gets an untimed warm-up run first.

Cases come from cases/bench/bench.ini (label `bench`, not nightly). --quick
runs a small case for CI. Checks (exit 1 when one fails): every measurement
is there and positive, the harness's own verdicts are as expected, and each
peak-bytes ratio ours/torch lies within [1/R, R] for --max-mem-ratio R. Step
times are reported, never checked: they depend on the machine's load.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUNS = (("none", "baseline_1", "torch_none"), ("reentrant", "reentrant", "torch_reentrant"),
        ("nonreentrant", "nonreentrant", "torch_nonreentrant"))


def load_allocator(path):
    """The counting allocator, installed before torch is imported (c10 has
    one CPU allocator slot per process; the first tensor must come from it)."""
    if "torch" in sys.modules:
        raise SystemExit("bench_vs_torch: torch was imported before the counting allocator was installed")
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    lib.ckpt_install_counting_allocator.restype = ctypes.c_int
    lib.ckpt_counting_allocator_installed.restype = ctypes.c_int
    lib.ckpt_counting_allocator_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
    if lib.ckpt_install_counting_allocator() != 0 or not lib.ckpt_counting_allocator_installed():
        raise SystemExit(f"bench_vs_torch: could not install the counting allocator from {path}")
    return lib


def loaded_c10():
    """Real paths of the libc10 copies mapped into this process."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith("libc10.so"):
                paths.add(os.path.realpath(path))
    return paths


def harness_numbers(h5py, path, run):
    """(median step ms, peak bytes, forward peak, backward peak, median
    step CPU ms) of one harness run, from its report."""
    with h5py.File(path, "r") as f:
        g = f[f"runs/{run}"]
        timing = dict(g["timing"].attrs) if "timing" in g else {}
        memory = dict(g["memory"].attrs) if "memory" in g else {}
    if "step_ms" in timing:
        step = float(timing["step_ms"])
    else:
        # Older reports: per-run sums over the steps.
        step = (float(timing["forward_ms"]) + float(timing["backward_ms"])) / float(timing["steps"])
    nan = float("nan")
    return (step, float(memory.get("peak_bytes", nan)), float(memory.get("forward_peak_bytes", nan)),
            float(memory.get("backward_peak_bytes", nan)), float(timing.get("step_cpu_ms", nan)))


def fmt_bytes(n):
    return f"{n / 2**20:8.2f}"


def quartiles(values):
    """(q1, median, q3) of a list, inclusive method (the data's own range)."""
    v = sorted(values)
    if len(v) == 1:
        return v[0], v[0], v[0]
    q1, med, q3 = statistics.quantiles(v, n=4, method="inclusive")
    return q1, med, q3


def run_harness(args, case_name, steps, threads, out):
    """One ckpt-verify process: its output, exit code and report path."""
    # One recorded step (its gradients are compared bitwise), the rest timed
    # only: torch's side records nothing, and copying every step's gradients
    # out would leave the harness's next forward fresh memory to fault in.
    cmd = [args.ckpt_verify, "--cases", args.cases, "--case", case_name, "--steps", "1", "--repeats", str(steps),
           "--threads", str(threads), "--out", out]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return cmd, p, os.path.join(out, f"{case_name}.h5")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default=None, help="case to run (default: bench_mlp; with --quick bench_mlp_quick)")
    ap.add_argument("--cases", default=os.path.join(ROOT, "cases", "bench", "bench.ini"), help="case file")
    ap.add_argument("--quick", action="store_true", help="the small CI case, 3 steps, 3 repeats")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run, median taken (default 5)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="interleaved repeats (ours, torch) behind the medians and spreads (default 9; 3 with --quick)")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op and BLAS threads on both sides (default 1: a step's CPU time is then its work, "
                         "not threads spinning while they wait for a shared core)")
    ap.add_argument("--ckpt-verify", default=os.path.join(ROOT, "build", "ckpt-verify"))
    ap.add_argument("--lib", default=None, help="libckpt_aten.so (default: next to --ckpt-verify)")
    ap.add_argument("--out", default=None, help="directory for the harness reports (default: a temporary one)")
    ap.add_argument("--max-mem-ratio", type=float, default=1.5,
                    help="fail when a peak-bytes ratio ours/torch is above R or below 1/R (default 1.5)")
    args = ap.parse_args(argv)
    case_name = args.case or ("bench_mlp_quick" if args.quick else "bench_mlp")
    steps = args.steps or (3 if args.quick else 5)
    repeats = args.repeats or (3 if args.quick else 9)
    if steps < 1 or repeats < 1:
        ap.error("--steps and --repeats must be at least 1")
    lib_path = args.lib or os.path.join(os.path.dirname(os.path.abspath(args.ckpt_verify)), "libckpt_aten.so")
    if args.threads < 1:
        ap.error("--threads must be at least 1")
    # Read by OpenMP and OpenBLAS when they load (here, with the allocator's
    # library, and in each ckpt-verify process): both sides get the same.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    lib = load_allocator(lib_path)
    import h5py
    import torch
    c10 = loaded_c10()
    if len(c10) != 1:
        # A libckpt_aten.so built against another libtorch than python's
        # torch: two c10s, two allocator slots, meaningless numbers.
        print(f"bench_vs_torch: libckpt_aten.so and torch load different libc10: {', '.join(sorted(c10))}",
              file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    from ckpt_verify.frontends import harness_twin as tc

    threads = args.threads
    torch.set_num_threads(threads)
    tmp = None
    out = args.out
    if not out:
        tmp = tempfile.TemporaryDirectory(prefix="bench_vs_torch.")
        out = tmp.name
    problems = []
    ours = {label: [] for label, _, _ in RUNS}    # per repeat: (step ms, peak, fwd peak, bwd peak)
    theirs = {label: [] for label, _, _ in RUNS}
    case = blas = None
    for k in range(1, repeats + 1):
        cmd, p, report = run_harness(args, case_name, steps, threads, os.path.join(out, f"repeat{k}"))
        if k == 1:
            print("harness: " + " ".join(os.path.basename(c) if c == args.ckpt_verify else c for c in cmd),
                  flush=True)
            print(p.stdout.rstrip())
        if p.returncode != 0:
            if k > 1:
                print(p.stdout.rstrip())
            problems.append(f"repeat {k}: ckpt-verify exited {p.returncode}: its own verdicts are not as the "
                            f"case expects")
        if not os.path.exists(report):
            print(f"bench_vs_torch: no report {report}", file=sys.stderr)
            return 2
        for label, run, _ in RUNS:
            ours[label].append(harness_numbers(h5py, report, run))
        if case is None:
            with h5py.File(report, "r") as src:
                case = tc.Case(src)
                blas = src.attrs.get("blas", b"?").decode()
            case.steps = steps
            # Warm-up: kernels, thread pool and allocator paths, untimed.
            tc.train(case, "torch_none", allocator=lib, record=False)
        for label, _, torch_run in RUNS:
            r = tc.train(case, torch_run, allocator=lib, record=False)
            theirs[label].append((r.attrs["timing.step_ms"], float(max(r.peak_bytes)),
                                  float(max(r.forward_peak_bytes)), float(max(r.backward_peak_bytes)),
                                  r.attrs["timing.step_cpu_ms"]))
        print(f"repeat {k}/{repeats}: ours/torch step CPU time " + ", ".join(
            f"{label} {ours[label][-1][4] / theirs[label][-1][4]:.3f}" for label, _, _ in RUNS) +
            "; wall " + ", ".join(f"{label} {ours[label][-1][0] / theirs[label][-1][0]:.3f}"
                                  for label, _, _ in RUNS), flush=True)
    if tmp:
        tmp.cleanup()

    seg = "every layer" if case.segments == 0 else f"{case.segments} segments"
    print(f"\n{case_name}: {case.model}, {case.layers} layers, hidden {case.hidden}, batch "
          f"{case.x.shape[0]} x seq {case.x.shape[1]}, dropout {case.dropout}, {seg}; {threads} threads; "
          f"BLAS {blas}; {repeats} interleaved repeats of {steps} steps (median per run)")
    for title, i in (("step CPU time (process CPU ms of forward + backward, all threads: the step's cost, "
                       "however long other work held the cores)", 4),
                      ("step wall time (ms; on a loaded machine it mostly measures the load)", 0)):
        print(f"{title}: each side's median over the repeats [min-max]; ratio ours/torch per repeat: median, "
              f"interquartile range, min-max")
        print(f"  {'run':<13} {'ours':>8} {'[min-max]':>15} {'torch':>9} {'[min-max]':>15}   "
              f"{'ratio':>6} {'IQR':>13} {'min-max':>13}")
        for label, _, _ in RUNS:
            ot = [o[i] for o in ours[label]]
            tt = [t[i] for t in theirs[label]]
            ratios = [a / b for a, b in zip(ot, tt)]
            q1, med, q3 = quartiles(ratios)
            print(f"  {label:<13} {statistics.median(ot):8.2f} {f'[{min(ot):.1f}-{max(ot):.1f}]':>15} "
                  f"{statistics.median(tt):9.2f} {f'[{min(tt):.1f}-{max(tt):.1f}]':>15}   {med:6.3f} "
                  f"{f'{q1:.3f}-{q3:.3f}':>13} {f'{min(ratios):.3f}-{max(ratios):.3f}':>13}")
    print("peak bytes (counting allocator, both sides; the same every repeat: the largest is shown)")
    print(f"  {'run':<13} {'peak MiB':>8} {'torch MiB':>9} {'ratio':>6}   {'saved':>6} {'torch saved':>11}   "
          f"{'peak MiB fwd/bwd: ours':>21}  torch")
    o_none = max(o[1] for o in ours["none"])
    t_none = max(t[1] for t in theirs["none"])
    for label, _, _ in RUNS:
        om, ofp, obp = (max(o[i] for o in ours[label]) for i in (1, 2, 3))
        tm, tfp, tbp = (max(t[i] for t in theirs[label]) for i in (1, 2, 3))
        print(f"  {label:<13} {fmt_bytes(om)} {fmt_bytes(tm):>9} {om / tm:6.3f}   {1 - om / o_none:6.1%} "
              f"{1 - tm / t_none:11.1%}   {fmt_bytes(ofp)}/{fmt_bytes(obp).strip()} "
              f"{fmt_bytes(tfp)}/{fmt_bytes(tbp).strip()}")
        for side, rows in (("our", ours[label]), ("torch", theirs[label])):
            for what, i in (("step time", 0), ("peak", 1), ("step CPU time", 4)):
                if not all(r[i] > 0 for r in rows):
                    problems.append(f"{label}: {side} {what} missing or not positive "
                                    f"({', '.join(str(r[i]) for r in rows)})")
        if om > 0 and tm > 0 and not (1 / args.max_mem_ratio <= om / tm <= args.max_mem_ratio):
            problems.append(f"{label}: peak bytes ours/torch = {om / tm:.2f}, outside "
                            f"[{1 / args.max_mem_ratio:.2f}, {args.max_mem_ratio:.2f}]")
    for problem in problems:
        print(f"bench_vs_torch: FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
