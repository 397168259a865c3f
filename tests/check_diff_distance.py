#!/usr/bin/env python3
"""check_diff_distance.py CKPT_VERIFY OUT_DIR FILE.h5 RUN...: `diff` shows the
distance the judge's table shows. For each RUN, judges FILE (`ckpt-verify
judge --out OUT_DIR`), then diffs FILE:baseline_0 against FILE:RUN, and checks
that the largest "max scaled ULP" of diff's tensor lines is the figure in the
table's `scaled ULP` column for RUN, that every ULP figure diff prints is
labelled (scaled or raw), and that at least one line's raw distance differs
from its scaled one (so the check could tell them apart)."""
import re
import subprocess
import sys


def main():
    cv, out, path, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    table = subprocess.run([cv, "judge", "--out", out, path], capture_output=True, text=True)
    if table.returncode not in (0, 1):
        sys.exit(f"judge exited {table.returncode}: {table.stderr}")
    cells = {}
    for line in table.stdout.splitlines():
        m = re.match(r"  (\S+)\s+(PASS|NOISE|FAIL|MEMFAIL|ERROR|NOT_OBSERVABLE)\s+(yes|NO)\s+(.+?)\s{2,}", line)
        if m:
            cells[m.group(1)] = m.group(4)
    bad, told_apart = [], 0
    for run in runs:
        res = subprocess.run([cv, "diff", f"{path}:baseline_0", f"{path}:{run}"], capture_output=True, text=True)
        if res.returncode not in (0, 1):
            bad.append(f"diff baseline_0 {run}: exit {res.returncode}: {res.stderr}")
            continue
        scaled = []
        for line in res.stdout.splitlines()[1:]:
            if " differ; first at " not in line:
                continue
            if re.search(r"(?<!scaled )(?<!raw )max ULP", line):
                bad.append(f"{run}: an unlabelled max ULP: {line.strip()}")
            m = re.search(r"max scaled ULP (\S+) .*raw max ULP (\S+?);", line)
            if not m:
                bad.append(f"{run}: no scaled and raw ULP on: {line.strip()}")
                continue
            scaled.append(float(m.group(1)))
            told_apart += m.group(1) != m.group(2)
        want = cells.get(run)
        got = f"{max(scaled):.3g}" if scaled else "-"
        if got != want:
            bad.append(f"{run}: diff's largest max scaled ULP {got!r}, the table's scaled ULP {want!r}")
    if not told_apart:
        bad.append("no tensor whose raw and scaled distances differ: the check cannot tell them apart")
    for b in bad:
        print("check_diff_distance:", b)
    print(f"check_diff_distance: {len(runs)} run(s), {told_apart} line(s) with raw != scaled, {len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
