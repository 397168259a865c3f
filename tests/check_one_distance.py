#!/usr/bin/env python3
"""check_one_distance.py CKPT_VERIFY OUT_DIR FILE.h5...: one verdict shows one
distance. Judges the files with `ckpt-verify judge --out OUT_DIR`, draws the
plots, and checks for every judged run that the figure under the table's
`scaled ULP` column, summary.json's max_scaled_ulp, the JUnit property of
that name, the determinism plot's cell and the "max scaled ULP" the reason
names are the same text; that the raw element-wise distance appears only
labelled raw (summary raw_max_ulp, "raw max ULP" in a reason); and that
at least one run's raw distance differs from its scaled one, so the check
could tell them apart. A FAIL decided by a missing tensor shows that in
place of a distance (the table, the plot's cell)."""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def scaled_text(v):
    """The figure as the C side prints it (scaled_ulp_format): %.3g or inf."""
    if v is None:
        return "inf"
    return f"{v:.3g}"


def main():
    cv, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    table = subprocess.run([cv, "judge", "--out", out, *files], capture_output=True, text=True)
    if table.returncode not in (0, 1):
        sys.exit(f"judge exited {table.returncode}: {table.stderr}")
    subprocess.run([cv, "plot", out], check=True, stdout=subprocess.DEVNULL)
    bad = []
    # the table: the header names the column, each row its figure
    rows, case = {}, None
    for line in table.stdout.splitlines():
        m = re.match(r"case (\S+) ", line)
        if m:
            case = m.group(1)
            continue
        if re.match(r"\s+impl\s+verdict\s+ok\s+scaled ULP\s", line):
            continue
        if " max ULP" in line and "raw max ULP" not in line:
            bad.append(f"table line names an unlabelled max ULP: {line.strip()}")
        m = re.match(r"  (\S+)\s+(PASS|NOISE|FAIL|MEMFAIL|ERROR|NOT_OBSERVABLE)\s+(yes|NO)\s+(.+?)\s{2,}", line)
        if m and case:
            rows[(case, m.group(1))] = m.group(4)
    if "scaled ULP" not in table.stdout.split("\n", 3)[-1] and not rows:
        bad.append("no table rows with a 'scaled ULP' column")
    with open(os.path.join(out, "summary.json")) as f:
        records = json.load(f)["records"]
    junit = {}
    for tc in ET.parse(os.path.join(out, "junit.xml")).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        junit[(tc.get("classname").removeprefix("ckpt-verify."), tc.get("name"))] = props
    cells = {}
    for name in sorted(os.listdir(os.path.join(out, "plots"))):
        if not re.fullmatch(r"determinism(_\d+)?\.dat", name):
            continue
        with open(os.path.join(out, "plots", name)) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                parts = line.split('"')
                cells[(parts[3], parts[1])] = parts[0].split()[3]
    told_apart = 0
    for r in records:
        key = (r["case"], r["impl"])
        want = "-" if "max_scaled_ulp" not in r else scaled_text(r["max_scaled_ulp"])
        # a FAIL decided before any distance shows what decided it instead
        decided = r.get("decided_by")
        table, cell = rows.get(key), cells.get(key)
        if decided:
            table = "-" if table == decided else table
            cell = "-" if cell == decided.split()[0] else cell
        seen = {"table": table, "junit": junit.get(key, {}).get("max_scaled_ulp", "-"), "plot": cell}
        for where, got in seen.items():
            if got != want:
                bad.append(f"{key}: {where} shows {got!r}, summary max_scaled_ulp {want!r}")
        named = re.findall(r"max scaled ULP (\S+?)(?:[;:,)]|$| )", r["reason"])
        if want != "-" and r["verdict"] in ("NOISE", "FAIL") and named != [want]:
            bad.append(f"{key}: the reason names max scaled ULP {named}, the table {want!r}: {r['reason']}")
        if re.search(r"(?<!raw )max ULP", r["reason"]):
            bad.append(f"{key}: the reason names an unlabelled max ULP: {r['reason']}")
        raw = r.get("raw_max_ulp")
        if want not in ("-", "inf") and raw is not None and str(raw) != want:
            told_apart += 1
    if not told_apart:
        bad.append("no run whose raw and scaled distances differ: the check cannot tell them apart")
    for b in bad:
        print("check_one_distance:", b)
    print(f"check_one_distance: {len(records)} runs, {told_apart} with raw != scaled, {len(bad)} disagreement(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
