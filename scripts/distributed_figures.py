#!/usr/bin/env python3
"""Per-rank figures of a distributed report (verify(world_size=N, ...)):
for every distributed run, each rank's bytes held at the end of forward,
peak bytes, gradient bytes, step time and all-gathers, beside the
single-process baseline_0 of the same global batch. Reads the report with
h5py only (docs/distributed.md, docs/schema.md).

usage: distributed_figures.py [--plot OUT.png|OUT.svg] REPORT.h5 [REPORT.h5 ...]
(--plot draws the first report's bytes per rank with gnuplot,
scripts/plot_per_rank_memory.gp)"""
import os
import subprocess
import sys
import tempfile

import h5py


def _attrs(group, name):
    return dict(group[name].attrs) if name in group else {}


def table(path: str) -> str:
    lines = [path, f"  {'run':<28} {'rank':>4} {'held end fwd':>13} {'peak':>10} {'grads':>9} {'step ms':>8} "
                   f"{'all-gathers f/b':>15} {'gathered B':>10}"]
    with h5py.File(path, "r") as f:
        single = _attrs(f["runs/baseline_0"], "memory")
        single_t = _attrs(f["runs/baseline_0"], "timing")
        lines.append(f"  {'baseline_0 (one process)':<28} {'-':>4} {single.get('end_forward_bytes', '-'):>13} "
                     f"{single.get('peak_bytes', '-'):>10} {single.get('grad_bytes', '-'):>9} "
                     f"{single_t.get('step_ms', 0):>8.1f} {'-':>15} {'-':>10}")
        for run, g in f["runs"].items():
            if "ranks" not in g or "_rerun_" in run:
                continue
            for rank in sorted(g["ranks"], key=int):
                r = g[f"ranks/{rank}"]
                m, t, c = _attrs(r, "memory"), _attrs(r, "timing"), _attrs(r, "collectives")
                gathers = f"{c.get('forward_all_gathers', '-')}/{c.get('backward_all_gathers', '-')}"
                lines.append(f"  {run:<28} {rank:>4} {m.get('end_forward_bytes', '-'):>13} "
                             f"{m.get('peak_bytes', '-'):>10} {m.get('grad_bytes', '-'):>9} "
                             f"{t.get('step_ms', 0):>8.1f} {gathers:>15} {c.get('all_gather_bytes', '-'):>10}")
    return "\n".join(lines)


def plot(path: str, out: str) -> None:
    """The first report's held and peak bytes per rank, one bar group per
    run and rank, the single-process baseline first (gnuplot)."""
    rows = []
    with h5py.File(path, "r") as f:
        m = _attrs(f["runs/baseline_0"], "memory")
        rows.append(("one process", m.get("end_forward_bytes", 0), m.get("peak_bytes", 0)))
        for run, g in f["runs"].items():
            if "ranks" not in g or "_rerun_" in run:
                continue
            for rank in sorted(g["ranks"], key=int):
                m = _attrs(g[f"ranks/{rank}"], "memory")
                rows.append((f"{run} r{rank}", m.get("end_forward_bytes", 0), m.get("peak_bytes", 0)))
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        dat.write('"run" "held at end of forward" "peak"\n')
        for label, held, peak in rows:
            dat.write(f'"{label}" {int(held)} {int(peak)}\n')
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_per_rank_memory.gp")
    term = "svg" if out.endswith(".svg") else "png"
    try:
        subprocess.run(["gnuplot", "-e", f"data='{dat.name}'; nrow={len(rows)}; out='{out}'; term='{term}'", script],
                       check=True)
    finally:
        os.unlink(dat.name)


def main(argv=None):
    paths = list(argv if argv is not None else sys.argv[1:])
    out = None
    if paths[:1] == ["--plot"] and len(paths) >= 2:
        out, paths = paths[1], paths[2:]
    if not paths:
        print(__doc__.strip().split("\n")[-3], file=sys.stderr)
        return 2
    if out:
        try:
            plot(paths[0], out)
        except (OSError, KeyError, subprocess.CalledProcessError) as e:
            print(f"distributed_figures: {paths[0]}: cannot plot: {e}", file=sys.stderr)
            return 2
    for p in paths:
        try:
            print(table(p))
        except (OSError, KeyError) as e:
            print(f"distributed_figures: {p}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
