#!/usr/bin/env python3
"""Side-by-side benchmark: the same model, parameters and inputs trained by
ckpt-verify and by PyTorch (torch.utils.checkpoint), in one run on this
machine: median step time and peak bytes for none, reentrant and
non-reentrant, and the ratios ours / torch.

    bench_vs_torch.py [--case bench_mlp] [--quick] [--steps N] [--threads N]

Both sides are measured by the same allocator: the harness's counting CPU
allocator (harness/aten/aten.h) is loaded into this Python process from
libckpt_aten.so and installed before torch makes its first tensor, so a
"peak byte" means the same thing on both sides (live bytes at the highest
point of forward + backward, minus those live when the step started). The
harness's numbers come from its HDF5 report (/runs/<run>/memory and
/timing); torch's are taken here around the same step. Step time is the
median over the run's steps (forward + loss + backward, no SGD update), on
both sides; the harness's `none` is its second baseline (the first pays the
process's warm-up), and torch gets an untimed warm-up run first.

Cases come from cases/bench/bench.ini (label `bench`, not nightly). --quick
runs a small case for CI. Checks (exit 1 when one fails): every measurement
is there and positive, the harness's own verdicts are as expected, and each
peak-bytes ratio ours/torch lies within [1/R, R] for --max-mem-ratio R. Step
times are reported, never checked: they depend on the machine's load.
"""
import argparse
import ctypes
import os
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
    """(median step ms, peak bytes, forward peak, backward peak) of one
    harness run, from its report."""
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
            float(memory.get("backward_peak_bytes", nan)))


def fmt_bytes(n):
    return f"{n / 2**20:8.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default=None, help="case to run (default: bench_mlp; with --quick bench_mlp_quick)")
    ap.add_argument("--cases", default=os.path.join(ROOT, "cases", "bench", "bench.ini"), help="case file")
    ap.add_argument("--quick", action="store_true", help="the small CI case, 3 steps")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run, median taken (default 5)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads on both sides (0: torch's default)")
    ap.add_argument("--ckpt-verify", default=os.path.join(ROOT, "build", "ckpt-verify"))
    ap.add_argument("--lib", default=None, help="libckpt_aten.so (default: next to --ckpt-verify)")
    ap.add_argument("--out", default=None, help="directory for the harness report (default: a temporary one)")
    ap.add_argument("--max-mem-ratio", type=float, default=1.5,
                    help="fail when a peak-bytes ratio ours/torch is above R or below 1/R (default 1.5)")
    args = ap.parse_args(argv)
    case_name = args.case or ("bench_mlp_quick" if args.quick else "bench_mlp")
    steps = args.steps or (3 if args.quick else 5)
    lib_path = args.lib or os.path.join(os.path.dirname(os.path.abspath(args.ckpt_verify)), "libckpt_aten.so")

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
    sys.path.insert(0, HERE)
    import torch_crosscheck as tc

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    tmp = None
    out = args.out
    if not out:
        tmp = tempfile.TemporaryDirectory(prefix="bench_vs_torch.")
        out = tmp.name
    cmd = [args.ckpt_verify, "--cases", args.cases, "--case", case_name, "--steps", str(steps),
           "--threads", str(threads), "--out", out]
    print("harness: " + " ".join(os.path.basename(c) if c == args.ckpt_verify else c for c in cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout.rstrip())
    problems = []
    if p.returncode != 0:
        problems.append(f"ckpt-verify exited {p.returncode}: its own verdicts are not as the case expects")
    report = os.path.join(out, f"{case_name}.h5")
    if not os.path.exists(report):
        print(f"bench_vs_torch: no report {report}", file=sys.stderr)
        return 2

    ours = {label: harness_numbers(h5py, report, run) for label, run, _ in RUNS}
    with h5py.File(report, "r") as src:
        case = tc.Case(src)
    case.steps = steps
    # Warm-up: kernels, thread pool and allocator paths, untimed.
    tc.train(case, "torch_none", allocator=lib, record=False)
    theirs = {}
    for label, _, torch_run in RUNS:
        r = tc.train(case, torch_run, allocator=lib, record=False)
        theirs[label] = (r.attrs["timing.step_ms"],
                         float(max(r.peak_bytes)), float(max(r.forward_peak_bytes)),
                         float(max(r.backward_peak_bytes)))
    if tmp:
        tmp.cleanup()

    seg = "every layer" if case.segments == 0 else f"{case.segments} segments"
    print(f"\n{case_name}: {case.model}, {case.layers} layers, hidden {case.hidden}, batch "
          f"{case.x.shape[0]} x seq {case.x.shape[1]}, dropout {case.dropout}, {seg}; {threads} threads; "
          f"median of {steps} steps; peak = counting allocator, both sides")
    print(f"  {'run':<13} {'step ms':>9} {'torch ms':>9} {'ratio':>6}   {'peak MiB':>8} {'torch MiB':>9} "
          f"{'ratio':>6}   {'saved':>6} {'torch saved':>11}   {'peak MiB fwd/bwd: ours':>21}  torch")
    for label, _, _ in RUNS:
        (ot, om, ofp, obp), (tt, tm, tfp, tbp) = ours[label], theirs[label]
        saved = 1 - om / ours["none"][1]
        tsaved = 1 - tm / theirs["none"][1]
        print(f"  {label:<13} {ot:9.2f} {tt:9.2f} {ot / tt:6.2f}   {fmt_bytes(om)} {fmt_bytes(tm):>9} "
              f"{om / tm:6.2f}   {saved:6.1%} {tsaved:11.1%}   "
              f"{fmt_bytes(ofp)}/{fmt_bytes(obp).strip()} {fmt_bytes(tfp)}/{fmt_bytes(tbp).strip()}")
        for what, v in (("our step time", ot), ("torch step time", tt), ("our peak", om), ("torch peak", tm)):
            if not v > 0:
                problems.append(f"{label}: {what} missing or not positive ({v})")
        if om > 0 and tm > 0 and not (1 / args.max_mem_ratio <= om / tm <= args.max_mem_ratio):
            problems.append(f"{label}: peak bytes ours/torch = {om / tm:.2f}, outside "
                            f"[{1 / args.max_mem_ratio:.2f}, {args.max_mem_ratio:.2f}]")
    for problem in problems:
        print(f"bench_vs_torch: FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
