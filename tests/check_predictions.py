#!/usr/bin/env python3
"""check_predictions.py RUN_DIR [LIMIT]: every record of RUN_DIR/summary.json
whose run did the case's work (verdict PASS or NOISE, and each case's
baseline) holds at the end of forward within LIMIT (default 0.05) of the
model's prediction. A one-time workspace counted in the first run (the
cuBLAS workspace: 32 MiB against a few KiB) fails it. Prints the worst
error and every miss; exit 1 on a miss, 2 when there is nothing to check."""
import json
import sys


def main():
    run_dir = sys.argv[1]
    limit = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
    with open(f"{run_dir}/summary.json") as f:
        records = json.load(f)["records"]
    checks, misses, seen = [], [], set()
    for r in records:
        if r.get("case") not in seen and r.get("baseline_end_forward_bytes") is not None:
            seen.add(r["case"])
            checks.append((r["case"], "baseline", r["baseline_end_forward_bytes"],
                           r.get("predicted_baseline_end_forward_bytes")))
        if r.get("verdict") in ("PASS", "NOISE"):
            checks.append((r["case"], r["impl"], r.get("end_forward_bytes"), r.get("predicted_end_forward_bytes")))
    worst = (-1.0, None)
    for case, run, held, predicted in checks:
        if held is None or not predicted:
            misses.append(f"{case}/{run}: no measurement or prediction")
            continue
        err = abs(held - predicted) / predicted
        worst = max(worst, (err, f"{case}/{run}"), key=lambda w: w[0])
        if err > limit:
            misses.append(f"{case}/{run}: held {held:.0f} bytes, predicted {predicted:.0f} ({100 * err:+.1f}%)")
    if not checks:
        print(f"check_predictions: no record to check in {run_dir}")
        sys.exit(2)
    print(f"check_predictions: {len(checks)} runs, worst error {100 * worst[0]:.2f}% ({worst[1]}), "
          f"limit {100 * limit:.0f}%")
    for m in misses:
        print("  MISS", m)
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()
