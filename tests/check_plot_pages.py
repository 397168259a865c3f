#!/usr/bin/env python3
"""check_plot_pages.py CKPT_VERIFY MODE SRC OUT: the plots hide no data and
can be read at their natural size.

  nightly SRC OUT  SRC/summary.json (a real run) copied into >= 111 cases, a
                   third of the reference runs' timings made unstable (their
                   slowest baseline 1.6x the fastest), then drawn: every image
                   at most 2000 pixels wide and tall, the per-case plots paged
                   (NAME_1.png, NAME_2.png, ... without gaps, each named in
                   the log, no stale NAME.png), every measured overhead on a
                   page (the unstable ones marked, with their whiskers down
                   to step / slowest baseline), and every held cut with its
                   peak cut beside it and its own impl's prediction (one per
                   impl, drawn on that impl's bar).
  one SRC OUT      the first case of SRC alone: no drawn image has ink at its
                   edges (a legend or title running off the picture).
  outlier SRC OUT  one overhead of SRC set to 150x: the overhead plot's y axis
                   is logarithmic (no other bar flattened), and linear without it.
  rows SRC OUT     20 impls in two pages of columns, half the cases running
                   each half: no determinism page has an empty row.
  footer SRC OUT   case names of 48 characters: the rotated names end above
                   the overhead and held_per_case footers.
  python SRC OUT   SRC is a Python-verified report's judge folder: the time
                   and memory plots are drawn beside determinism, with every
                   run that measured them."""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import png_pixels  # noqa: E402
from summary_tool import load, save  # noqa: E402

MAX_PX = 2000
PAGED = ("determinism", "overhead", "held_per_case")


def plot(cv, out):
    res = subprocess.run([cv, "plot", out], capture_output=True, text=True)
    if res.returncode != 0 or "warning" in res.stderr:
        sys.exit(f"plot {out}: exit {res.returncode}: {res.stdout}{res.stderr}")
    return res.stdout


def measured(r):
    return r["verdict"] in ("PASS", "NOISE") and r["impl"] in ("reentrant", "nonreentrant", "selective")


def read_dat(path):
    """(header titles, rows): each row the case name and its numbers."""
    with open(path) as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    header = re.findall(r'"([^"]*)"', lines[0])
    rows = []
    for line in lines[1:]:
        parts = line.split('"')
        rows.append((parts[1], [float(x) for x in parts[2].split()]))
    return header, rows


def check_nightly(cv, src, out):
    doc, bad = load(src), []
    base = doc["records"]
    copies = -(-111 // len({r["case"] for r in base}))
    records = []
    for k in range(copies):
        for i, r in enumerate(base):
            r = dict(r, case=f"{r['case']}_{k:02d}")
            if measured(r) and (k + i) % 3 == 0 and r.get("baseline_step_ms"):
                r["overhead_stable"] = False
                r["slowest_baseline_step_ms"] = 1.6 * r["baseline_step_ms"]
            records.append(r)
    doc["records"] = records
    save(doc, out)
    log = plot(cv, out)
    plots = os.path.join(out, "plots")
    for png in sorted(glob.glob(os.path.join(plots, "*.png"))):
        w, h = png_pixels.size(png)
        if w > MAX_PX or h > MAX_PX:
            bad.append(f"{os.path.basename(png)} is {w} x {h} pixels, more than {MAX_PX}")
    for name in PAGED:
        pages = sorted(int(m.group(1)) for p in os.listdir(plots)
                       if (m := re.fullmatch(rf"{name}_(\d+)\.png", p)))
        if len(pages) < 2 or pages != list(range(1, len(pages) + 1)):
            bad.append(f"{name}: pages {pages}, wanted 1..N with N > 1")
        if os.path.exists(os.path.join(plots, f"{name}.png")):
            bad.append(f"{name}.png beside its pages")
        for p in pages:
            if f"/{name}_{p}.png" not in log:
                bad.append(f"{name}_{p}.png not named in the log")
    # every measured overhead is drawn; the unstable ones marked, with whiskers
    overheads = {}
    for dat in glob.glob(os.path.join(plots, "overhead_*.dat")):
        header, rows = read_dat(dat)
        impls = [t for t in header[1:] if not t.endswith((" low", " high", " stable"))]
        for case, v in rows:
            for k, impl in enumerate(impls):
                overheads[(case, impl)] = v[1 + 4 * k:5 + 4 * k]
    n_unstable = 0
    for r in records:
        if not measured(r) or not isinstance(r.get("overhead"), (int, float)):
            continue
        got = overheads.get((r["case"], r["impl"]))
        if got is None:
            bad.append(f"overhead of {r['case']}/{r['impl']} ({r['overhead']:.3g}) on no page")
            continue
        value, low, high, stable = got
        if abs(value - r["overhead"]) > 1e-4 * r["overhead"]:
            bad.append(f"overhead of {r['case']}/{r['impl']}: drawn {value}, summary {r['overhead']}")
        if r.get("overhead_stable") is False:
            n_unstable += 1
            want_low = r["overhead"] * r["baseline_step_ms"] / r["slowest_baseline_step_ms"]
            if stable != 0 or abs(low - want_low) > 1e-3 * want_low or high != value:
                bad.append(f"unstable overhead of {r['case']}/{r['impl']}: drawn {got}, wanted "
                           f"[{value}, {want_low:.6g}, {value}, 0]")
    if n_unstable == 0:
        bad.append("no unstable overhead in the crafted summary: the check proves nothing")
    # held and peak cut side by side, and each impl's own prediction beside
    # its held cut (never one dot per case beside another impl's bar)
    cuts = {}
    for dat in glob.glob(os.path.join(plots, "held_per_case_*.dat")):
        header, rows = read_dat(dat)
        for case, v in rows:
            if len(v) != len(header):
                bad.append(f"{os.path.basename(dat)}: {case}: {len(v)} figures under {len(header)} titles")
            for t, x in zip(header, v):
                cuts[(case, t)] = x
    n_peak = n_predicted = 0
    for r in records:
        if not measured(r) or not r.get("baseline_peak_bytes") or r.get("peak_bytes") is None:
            continue
        want = 100 * (1 - r["peak_bytes"] / r["baseline_peak_bytes"])
        got = cuts.get((r["case"], f"{r['impl']} peak cut"))
        if got is None or abs(got - want) > 1e-3 * max(1.0, abs(want)):
            bad.append(f"peak cut of {r['case']}/{r['impl']}: drawn {got}, wanted {want:.6g}")
        n_peak += 1
        pred, pred_base = r.get("predicted_end_forward_bytes"), r.get("predicted_baseline_end_forward_bytes")
        if pred is not None and pred_base:
            want = 100 * (1 - pred / pred_base)
            got = cuts.get((r["case"], f"{r['impl']} predicted held cut"))
            if got is None or abs(got - want) > 1e-3 * max(1.0, abs(want)):
                bad.append(f"predicted held cut of {r['case']}/{r['impl']}: drawn {got}, wanted {want:.6g}")
            n_predicted += 1
    if n_predicted == 0:
        bad.append("no run with a predicted held cut: the check proves nothing")
    report(bad, f"{len(records)} records over {copies * len({r['case'] for r in base})} cases; "
                f"{n_unstable} unstable overheads marked; {n_peak} peak cuts beside their held cuts; "
                f"{n_predicted} predictions on their own impl's bar")


def check_one(cv, src, out):
    doc = load(src)
    first = doc["records"][0]["case"]
    doc["records"] = [r for r in doc["records"] if r["case"] == first]
    save(doc, out)
    plot(cv, out)
    bad = []
    pngs = sorted(glob.glob(os.path.join(out, "plots", "*.png")))
    for png in pngs:
        inked = png_pixels.inked_at_edges(png)
        if inked:
            bad.append(f"{os.path.basename(png)}: {len(inked)} pixel(s) of ink at the edge, first {inked[0]}")
    if not any(p.endswith("/determinism.png") for p in pngs):
        bad.append("no determinism.png")
    report(bad, f"{len(pngs)} image(s) of one case, nothing at their edges")


def check_python(cv, src, out):
    doc = load(src)
    save(doc, out)
    log = plot(cv, out)
    bad = []
    for name in ("determinism", "overhead", "held_per_case"):
        if not os.path.exists(os.path.join(out, "plots", f"{name}.png")):
            bad.append(f"{name} not drawn: {log}")
    runs = {r["impl"] for r in doc["records"] if r["verdict"] in ("PASS", "NOISE")}
    for name in ("overhead", "held_per_case"):
        path = os.path.join(out, "plots", f"{name}.dat")
        header = read_dat(path)[0] if os.path.exists(path) else []
        missing = [run for run in runs if run not in header and f"{run} held cut" not in header]
        if missing:
            bad.append(f"{name}: runs {missing} left out")
    report(bad, f"a Python report of {len(runs)} run(s): time and memory drawn beside determinism")


def svg_texts(path):
    with open(path) as f:
        return re.findall(r"<text>([^<]*)</text>", f.read())


def check_outlier(cv, src, out):
    """One overhead 150x while the others are near 1: the overhead plot gets
    a log y axis (ticks a decade apart) so no other bar is flattened; the
    same run without the outlier keeps its linear axis."""
    bad = []
    doc = load(src)
    plain = os.path.join(out, "plain")
    save(doc, plain)
    log = plot(cv, plain)
    if "overhead: log y axis" in log or "100x" in svg_texts(os.path.join(plain, "plots", "overhead.svg")):
        bad.append(f"a log axis without an outlier: {log}")
    target = next((r for r in doc["records"] if measured(r) and isinstance(r.get("overhead"), (int, float))), None)
    if target is None:
        report(["no measured overhead in the summary: the check proves nothing"], "")
    others = [r["overhead"] for r in doc["records"] if r is not target and isinstance(r.get("overhead"), (int, float))]
    target["overhead"] = 150.0
    outlier = os.path.join(out, "outlier")
    save(doc, outlier)
    log = plot(cv, outlier)
    ticks = svg_texts(os.path.join(outlier, "plots", "overhead.svg"))
    if "overhead: log y axis" not in log:
        bad.append(f"150x beside {min(others):.3g}..{max(others):.3g}: no log axis named in the log: {log}")
    if not {"1x", "10x", "100x"} <= set(ticks):
        bad.append(f"150x beside {min(others):.3g}..{max(others):.3g}: y ticks {ticks}, wanted 1x, 10x, 100x")
    report(bad, f"150x beside overheads of {min(others):.3g}..{max(others):.3g}: a log axis, none without it")


def check_rows(cv, src, out):
    """Twenty impls, too many for one page's width, where the even cases
    ran the first ten and the odd cases the last ten: each determinism page
    holds only the cases with a cell in its columns, with no empty row."""
    doc = load(src)
    template = doc["records"][0]
    records = []
    for c in range(10):
        for k in range(10 * (c % 2), 10 * (c % 2) + 10):
            records.append(dict(template, case=f"case_{c}", impl=f"impl_{k:02d}", verdict="PASS", expected=True))
    doc["records"] = records
    save(doc, out)
    log = plot(cv, out)
    bad, pages = [], 0
    for dat in sorted(glob.glob(os.path.join(out, "plots", "determinism*.dat"))):
        pages += 1
        rows = {}
        with open(dat) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                parts = line.split('"')
                rows.setdefault(int(parts[0].split()[1]), set()).add(parts[3])
        if sorted(rows) != list(range(len(rows))) or any(len(v) != 1 for v in rows.values()):
            bad.append(f"{os.path.basename(dat)}: rows {sorted(rows)} hold {rows}: a row without a cell between them")
        if len(rows) != 5:
            bad.append(f"{os.path.basename(dat)}: {len(rows)} rows, wanted the 5 cases that ran its impls")
    if pages < 2:
        bad.append(f"{pages} determinism page(s): the impls were meant to need two: {log}")
    report(bad, f"{pages} determinism pages, each row a case with a cell in its columns")


def footer_clear(png, n_lines, gap=6):
    """'' when the image's bottom text is its footer alone: n_lines lines,
    each centred, with at least `gap` blank rows above them; else why not."""
    w, h, ch, image = png_pixels.rows(png)
    inked = [[x for x in range(w) if min(line[x * ch:x * ch + 3]) < 200] for line in image]
    y = h - 1
    while y >= 0 and not inked[y]:
        y -= 1
    blocks, blank = [], 0
    while y >= 0 and blank < gap:
        if inked[y]:
            if blank or not blocks:
                blocks.append([y, y, min(inked[y]), max(inked[y])])
            b = blocks[-1]
            b[0], b[2], b[3] = y, min(b[2], min(inked[y])), max(b[3], max(inked[y]))
            blank = 0
        else:
            blank += 1
        y -= 1
    if y < 0:
        return "no ink above the footer"
    if len(blocks) != n_lines:
        return f"{len(blocks)} bands of text at the bottom, wanted the footer's {n_lines} lines alone"
    for top, bottom, left, right in blocks:
        if abs(left + right - w) > 0.05 * w:
            return f"rows {top}..{bottom} hold ink from x {left} to {right}: not the centred footer alone"
    return ""


def check_footer(cv, src, out):
    """Case names of 48 characters: the rotated names end above the footer
    of the overhead and held_per_case plots, never through it."""
    doc = load(src)
    for r in doc["records"]:
        r["case"] = "selective_attention_core_seq512_bs8_" + r["case"][:12].ljust(12, "_")
    save(doc, out)
    plot(cv, out)
    bad = []
    for name, lines in (("overhead", 3), ("held_per_case", 1)):
        why = footer_clear(os.path.join(out, "plots", f"{name}.png"), lines)
        if why:
            bad.append(f"{name}.png: {why}")
    report(bad, "case names of 48 characters end above the footers")


def report(bad, what):
    for b in bad:
        print("check_plot_pages:", b)
    print("check_plot_pages:", what if not bad else f"{len(bad)} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    cv, mode, src, out = sys.argv[1:5]
    {"nightly": check_nightly, "one": check_one, "python": check_python, "outlier": check_outlier,
     "rows": check_rows, "footer": check_footer}[mode](cv, src, out)
