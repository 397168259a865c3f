#!/usr/bin/env python3
"""The data behind the NOISE margin (harness/judge/judge.h, docs/noise.md): reads
summary.json files of harness runs and prints, for the reference impls
(reentrant, nonreentrant: their differences are kernel noise) and for the
planted bugs (impls/faulty/: their differences are bugs), the distribution of

  max_scaled_ulp  the largest distance of any tensor from baseline_0, in ULPs
                  at the tensor's scale
  noise_ratio     the largest ratio of a tensor's distance to its own
                  envelope (its baselines' spread, at least 1 ULP); inf when
                  a tensor whose baselines agree bitwise differs (outside
                  whatever the margin)

over runs that differed from baseline_0 through the tensors (a planted bug
stopped by the checkpoint's own check has no distance). With --plot PNG|-
it draws both as log-scale histograms with gnuplot ('-': a text plot).

usage: noise_margin.py [--plot OUT] SUMMARY.json... (or run directories)
"""
import json
import math
import os
import shutil
import subprocess
import sys

REFERENCES = {"reentrant", "nonreentrant"}


def load(paths):
    noise, bugs = [], []
    for p in paths:
        if os.path.isdir(p):
            p = os.path.join(p, "summary.json")
        with open(p) as f:
            records = json.load(f)["records"]
        for r in records:
            # Noise: a reference that came out NOISE. Bugs: an expected FAIL
            # (planted bugs, and references run the way PyTorch documents
            # as wrong, e.g. preserve_rng_state = false).
            is_noise = r.get("impl") in REFERENCES and r["verdict"] == "NOISE"
            is_bug = r["verdict"] == "FAIL" and r.get("expected")
            if not (is_noise or is_bug):
                continue
            scaled = r.get("max_scaled_ulp")
            if scaled is None or scaled == 0:
                continue  # no tensor distance: the checkpoint's own check stopped it
            # The ratio that decides: any differing tensor whose baselines
            # agree bitwise is outside whatever the margin (inf).
            noisy = r.get("noise_ratio") or 0.0
            ratio = math.inf if r.get("bitwise_tensors_differ") or noisy == 0 else noisy
            row = (scaled, ratio, r["case"], r["impl"], r["verdict"], noisy)
            (noise if is_noise else bugs).append(row)
    return noise, bugs


def quantiles(values):
    v = sorted(values)
    if not v:
        return "none"
    median = v[min(len(v) - 1, int(0.5 * (len(v) - 1) + 0.5))]
    return "n=%d  min %.3g  median %.3g  max %.3g" % (len(v), v[0], median, v[-1])


def histogram(values, lo=-1, hi=9):
    """Counts per decade of log10(value); inf goes to the last bin."""
    bins = [0] * (hi - lo + 1)
    for x in values:
        k = hi if math.isinf(x) else max(lo, min(hi, math.floor(math.log10(max(x, 10.0 ** lo)))))
        bins[k - lo] += 1
    return [(lo + i, c) for i, c in enumerate(bins)]


def plot(noise, bugs, out):
    lines = ["# decade noise_scaled bugs_scaled noise_ratio bugs_ratio"]
    hs = [histogram([r[0] for r in noise]), histogram([r[0] for r in bugs]),
          histogram([r[1] for r in noise]), histogram([r[1] for r in bugs])]
    for i in range(len(hs[0])):
        lines.append("%d %d %d %d %d" % (hs[0][i][0], hs[0][i][1], hs[1][i][1], hs[2][i][1], hs[3][i][1]))
    data = "\n".join(lines) + "\n"
    term = "dumb size 100,26" if out == "-" else "pngcairo size 900,420"
    script = f"""
set terminal {term}
{'' if out == '-' else f"set output '{out}'"}
set multiplot layout 1,2
set style data histograms
set style histogram clustered
set style fill solid 0.6
set xlabel 'log10 of the value (last bin: 9 or more, inf)'
set ylabel 'runs'
set title 'distance at the tensor scale (ULP)'
plot '-' using 2:xtic(1) title 'reference impls (noise)', '-' using 3 title 'planted bugs'
{data}e
{data}e
set title 'distance / own baseline spread'
plot '-' using 4:xtic(1) title 'reference impls (noise)', '-' using 5 title 'planted bugs'
{data}e
{data}e
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main(argv):
    out = None
    if len(argv) > 2 and argv[1] == "--plot":
        out, argv = argv[2], argv[2:]
    paths = argv[1:]
    if not paths:
        sys.exit(__doc__)
    noise, bugs = load(paths)
    print("reference impls that differed (kernel noise):")
    print("  distance at the tensor's scale:", quantiles([r[0] for r in noise]))
    print("  ratio to own spread:           ", quantiles([r[1] for r in noise if not math.isinf(r[1])]),
          "(+%d differing only where baselines agree bitwise)" % sum(math.isinf(r[1]) for r in noise))
    print("planted bugs caught through the tensors:")
    print("  distance at the tensor's scale:", quantiles([r[0] for r in bugs]))
    print("  ratio to own spread:           ", quantiles([r[1] for r in bugs if not math.isinf(r[1])]),
          "(+%d differing only where baselines agree bitwise)" % sum(math.isinf(r[1]) for r in bugs))
    print("  ratio on the tensors whose baselines differ:", quantiles([r[5] for r in bugs if r[5] > 0]))
    worst_noise = max((r[1] for r in noise if not math.isinf(r[1])), default=0)
    least_bug = min((r[1] for r in bugs if not math.isinf(r[1])), default=math.inf)
    print("largest noise ratio %.3g, smallest bug ratio %.3g: a margin between them separates these runs"
          % (worst_noise, least_bug))
    if out:
        if shutil.which("gnuplot"):
            plot(noise, bugs, out)
        else:
            print("noise_margin: no plot: gnuplot is absent (not on PATH)")


if __name__ == "__main__":
    main(sys.argv)
