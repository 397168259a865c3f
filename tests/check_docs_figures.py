#!/usr/bin/env python3
"""check_docs_figures.py CKPT_VERIFY ROOT: the nightly suite's size as the
docs state it is the size the tool reports. `ckpt-verify --suite nightly
--list` prints one line per case of the suite with its impl count; every
"nightly suite (N cases, M verdicts|case × impl records)" and "nightly
suite's N cases" in README.md and docs/*.md must say that N (and M, the
impls summed), unless the sentence dates it as history ("nightly suite as
it was on YYYY-MM-DD (N cases"). At least one figure must be found in
README.md and one in docs/nightly.md, so deleting them is noticed too."""
import glob
import os
import re
import subprocess
import sys

FIGURE = re.compile(r"nightly\s+suite(?P<history>\s+as\s+it\s+was\s+on\s+\d{4}-\d{2}-\d{2})?\s+\((?P<cases>\d+)\s+cases"
                    r"(?:,\s+(?P<records>\d+)\s+(?:verdicts|case\s+×\s+impl\s+records))?"
                    r"|nightly\s+suite's\s+(?P<cases2>\d+)\s+cases")


def suite_size(cv):
    out = subprocess.run([cv, "--suite", "nightly", "--list"], capture_output=True, text=True, check=True).stdout
    impls = [int(m.group(1)) for m in re.finditer(r"  impls: (\d+)  labels:", out)]
    if len(impls) != len(out.splitlines()):
        sys.exit(f"check_docs_figures: cannot read the impl count of every --list line:\n{out}")
    return len(impls), sum(impls)


def main():
    cv, root = sys.argv[1], sys.argv[2]
    cases, records = suite_size(cv)
    bad, found = [], {}
    for path in [os.path.join(root, "README.md"), *sorted(glob.glob(os.path.join(root, "docs", "*.md")))]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(path, root)
        for m in FIGURE.finditer(text):
            if m.group("history"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            found[name] = found.get(name, 0) + 1
            n = int(m.group("cases") or m.group("cases2"))
            if n != cases:
                bad.append(f"{name}:{line}: says {n} cases, the nightly suite has {cases}")
            if m.group("records") and int(m.group("records")) != records:
                bad.append(f"{name}:{line}: says {m.group('records')} verdicts, the suite gives {records}")
    for name in ("README.md", os.path.join("docs", "nightly.md")):
        if not found.get(name):
            bad.append(f"{name}: no figure of the nightly suite's size found")
    for b in bad:
        print("check_docs_figures:", b)
    print(f"check_docs_figures: the nightly suite has {cases} cases, {records} verdicts; "
          f"{sum(found.values())} figure(s) in {len(found)} file(s), {len(bad)} wrong")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
