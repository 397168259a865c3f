"""bench_scale_harness.py [--cv CKPT_VERIFY] [--case NAME] [--out DIR] [--json FILE]:
what one real-width harness case costs: the case's wall time and peak RSS,
its report's size against one run's tensors, and `judge`'s wall time, peak
RSS and throughput on that report: the bytes of every run's tensors (each
path counted, as a reader of the file sees them) per second of judging,
the process's start (loading libtorch: `--version`'s time) taken off.

Each command runs as a child process; its peak RSS is the kernel's
(os.wait4's ru_maxrss), so no instrumentation of the measured code. Run it
with two builds (--cv of each) to compare: the figures are measured in one
run of this script, on one machine. Case definitions: cases/bench/scale.ini.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import h5py


def measure(cmd: list[str]) -> dict:
    """Wall seconds, peak RSS (bytes) and exit code of one child process."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    return {"wall_s": wall, "peak_rss_bytes": usage.ru_maxrss * 1024, "exit": os.waitstatus_to_exitcode(status),
            "stderr_tail": err[-300:]}


def run_bytes(report: str) -> dict:
    """Bytes of tensors per run (every path counted, links included) and of
    baseline_0 alone: what judging reads logically, and one run's tensors."""
    per_run = {}
    with h5py.File(report, "r") as f:
        for name, run in f["runs"].items():
            total = 0

            def add(_, obj):
                nonlocal total
                if isinstance(obj, h5py.Dataset):
                    total += obj.size * obj.dtype.itemsize
            run.visititems(add)
            per_run[name] = total
    return per_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cv", action="append", required=True, help="a ckpt-verify binary (repeat to compare builds)")
    ap.add_argument("--case", default="scale_mlp8_h2048")
    ap.add_argument("--cases", default=os.path.join(os.path.dirname(__file__), "..", "cases", "bench", "scale.ini"))
    ap.add_argument("--out", default="bench_scale_out")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every case and judge gave the expected verdicts (exit 0)")
    args = ap.parse_args()
    rows = []
    for k, cv in enumerate(args.cv):
        out = os.path.join(args.out, f"build{k}")
        case = measure([cv, "--cases", args.cases, "--case", args.case, "--out", out])
        report = os.path.join(out, f"{args.case}.h5")
        if case["exit"] not in (0, 1) or not os.path.exists(report):
            print(f"{cv}: case failed (exit {case['exit']}): {case['stderr_tail']}", file=sys.stderr)
            return 2
        judge = measure([cv, "judge", report])
        # What the process takes to start (loading libtorch), not judging.
        startup = min(measure([cv, "--version"])["wall_s"] for _ in range(3))
        per_run = run_bytes(report)
        one_run = per_run["baseline_0"]
        judged = sum(per_run.values())
        rows.append({
            "cv": cv, "case": args.case, "case_exit": case["exit"],
            "case_wall_s": case["wall_s"], "case_peak_rss_bytes": case["peak_rss_bytes"],
            "report_bytes": os.path.getsize(report), "one_run_tensor_bytes": one_run,
            "report_over_one_run": os.path.getsize(report) / one_run, "runs": len(per_run),
            "judge_exit": judge["exit"], "judge_wall_s": judge["wall_s"],
            "judge_peak_rss_bytes": judge["peak_rss_bytes"],
            "startup_s": startup, "tensor_bytes_judged": judged,
            "judge_gb_per_s": judged / max(judge["wall_s"] - startup, 1e-3) / 1e9})
    fmt = "{:<34} {:>9} {:>10} {:>11} {:>9} {:>9} {:>10} {:>10}"
    print(fmt.format("build", "case s", "case RSS", "report", "report/1", "judge s", "judge RSS", "judge GB/s"))
    for r in rows:
        print(fmt.format(r["cv"][-34:], f"{r['case_wall_s']:.1f}", f"{r['case_peak_rss_bytes'] / 2**20:.0f} MiB",
                         f"{r['report_bytes'] / 2**20:.0f} MiB", f"{r['report_over_one_run']:.2f}x",
                         f"{r['judge_wall_s']:.2f}", f"{r['judge_peak_rss_bytes'] / 2**20:.0f} MiB",
                         f"{r['judge_gb_per_s']:.2f}"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if args.check:
        bad = [r for r in rows if r["case_exit"] != 0 or r["judge_exit"] != 0]
        for r in bad:
            print(f"{r['cv']}: {r['case']}: case exit {r['case_exit']}, judge exit {r['judge_exit']} "
                  f"(0: every verdict as expected)", file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
