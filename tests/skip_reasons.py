#!/usr/bin/env python3
"""skip_reasons.py CTEST_JUNIT.xml: prints each test CTest did not run
(Skipped by return code 77 or by its skip regex) with the reason the test
itself gave: the first line of its output. CTest's own summary names
skipped tests without why; CI prints this after the run, so a skipped test
is never silently absent. Exit 0 (information only), 2 on an unreadable file."""
import sys
import xml.etree.ElementTree as ET


def main():
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError, IndexError) as e:
        print(f"skip_reasons: {sys.argv[1:] and sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    skipped = [t for t in root.iter("testcase") if t.find("skipped") is not None]
    print(f"skipped tests: {len(skipped)} of {len(list(root.iter('testcase')))}")
    for t in skipped:
        out = (t.findtext("system-out") or "").strip().splitlines()
        print(f"  {t.get('name')}: {out[0] if out else '(no output)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
