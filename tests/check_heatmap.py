#!/usr/bin/env python3
"""check_heatmap.py CKPT_VERIFY OUT_DIR: the determinism heatmap's colour
rule, checked in code. Writes a summary.json whose records cover every
kind of cell (a reference PASS and NOISE, a planted bug caught, one that
cannot show, an UNEXPECTED PASS of a planted bug and an unexpected FAIL of
a reference), draws it with `ckpt-verify plot`, and checks in the data the
plot was drawn from that the colour says "as expected or not": red exactly
for the unexpected cells, never for an expected catch."""
import json
import os
import subprocess
import sys

RED, BLUE, GREEN, GREY = 0xEF5350, 0x90CAF9, 0xA5D6A7, 0xDEDEDE


def rec(case, impl, verdict, expected, raw, scaled):
    return {"case": case, "impl": impl, "verdict": verdict, "expected": expected, "reason": "crafted",
            "first_divergence": "", "raw_max_ulp": raw, "max_scaled_ulp": scaled}


def main():
    cv, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    records = [
        rec("c1", "reentrant", "PASS", True, 0, 0),
        rec("c1", "nonreentrant", "NOISE", True, 1648106509, 2.5),
        rec("c1", "no_rng_stash", "FAIL", True, 2000000000, 7.4e6),
        rec("c1", "rng_not_forked", "NOT_OBSERVABLE", True, 0, 0),
        rec("c2", "reentrant", "FAIL", False, 2000000000, 3e6),
        rec("c2", "no_rng_stash", "PASS", False, 0, 0),
    ]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"schema_version": 1, "records": records}, f)
    subprocess.run([cv, "plot", out], check=True, stdout=subprocess.DEVNULL)
    want = {("reentrant", "c1"): GREEN, ("nonreentrant", "c1"): GREEN, ("no_rng_stash", "c1"): BLUE,
            ("rng_not_forked", "c1"): GREY, ("reentrant", "c2"): RED, ("no_rng_stash", "c2"): RED}
    got = {}
    with open(os.path.join(out, "plots", "determinism.dat")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split('"')
            fields = parts[0].split()
            got[(parts[1], parts[3])] = (int(fields[2]), fields[3])
    bad = [f"{k}: colour {got.get(k, ('missing',))[0]:} wanted {v:#08x}" for k, v in want.items()
           if got.get(k, (None,))[0] != v]
    # The NOISE cell shows the distance at the tensor's scale, not 1.6e9 raw ULP.
    if got.get(("nonreentrant", "c1"), (0, ""))[1] != "2.5":
        bad.append(f"NOISE cell figure {got.get(('nonreentrant', 'c1'))}: wanted the scaled distance 2.5")
    for b in bad:
        print("check_heatmap:", b)
    print(f"check_heatmap: {len(want) - len(bad)} of {len(want)} cells as the rule says")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
