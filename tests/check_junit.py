#!/usr/bin/env python3
"""check_junit.py FILE [--tests N] [--failures N] [--errors N] [--skipped N]
   [--failed CASE/IMPL ...] [--property CASE/IMPL NAME VALUE]

Parses a junit.xml with a real XML parser (xml.etree) and checks that it
has the shape CI reporters read: <testsuites> holding one <testsuite> whose
tests/failures/errors/skipped attributes match both the counts given and
its own <testcase> children, each testcase named classname="ckpt-verify.CASE"
name="IMPL" with a numeric time. Exit 0 when everything holds; otherwise
prints what does not and exits 1."""
import argparse
import sys
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    for key in ("tests", "failures", "errors", "skipped"):
        ap.add_argument("--" + key, type=int)
    ap.add_argument("--failed", action="append", default=[], help="CASE/IMPL that must hold a <failure>")
    ap.add_argument("--errored", action="append", default=[], help="CASE/IMPL that must hold an <error>")
    ap.add_argument("--property", nargs=3, action="append", default=[], metavar=("CASE/IMPL", "NAME", "VALUE"))
    ap.add_argument("--text", nargs=2, action="append", default=[], metavar=("CASE/IMPL", "SUBSTRING"),
                    help="the testcase's failure/error text or system-out must contain SUBSTRING")
    a = ap.parse_args()
    problems = []
    root = ET.parse(a.file).getroot()  # raises on malformed XML: the test fails
    if root.tag != "testsuites":
        problems.append(f"root is <{root.tag}>, not <testsuites>")
    suites = root.findall("testsuite")
    if len(suites) != 1:
        problems.append(f"{len(suites)} <testsuite> elements, wanted 1")
    cases = {}
    for suite in suites:
        found = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for tc in suite.findall("testcase"):
            found["tests"] += 1
            found["failures"] += tc.find("failure") is not None
            found["errors"] += tc.find("error") is not None
            found["skipped"] += tc.find("skipped") is not None
            cls = tc.get("classname", "")
            if not cls.startswith("ckpt-verify."):
                problems.append(f"testcase classname {cls!r} does not start with 'ckpt-verify.'")
            float(tc.get("time"))  # raises when missing or not a number
            cases[cls[len("ckpt-verify."):] + "/" + tc.get("name", "")] = tc
        for key, n in found.items():
            for elem in (root, suite):
                if int(elem.get(key, "-1")) != n:
                    problems.append(f"<{elem.tag}> {key}={elem.get(key)} but it holds {n}")
            want = getattr(a, key)
            if want is not None and n != want:
                problems.append(f"{key}: {n}, wanted {want}")
        float(suite.get("time"))
    for name, tag in [(n, "failure") for n in a.failed] + [(n, "error") for n in a.errored]:
        tc = cases.get(name)
        if tc is None or tc.find(tag) is None:
            problems.append(f"{name}: no <{tag}>")
    for name, prop, value in a.property:
        tc = cases.get(name)
        got = None if tc is None else {p.get("name"): p.get("value") for p in tc.iter("property")}.get(prop)
        if got != value:
            problems.append(f"{name}: property {prop} = {got!r}, wanted {value!r}")
    for name, sub in a.text:
        tc = cases.get(name)
        texts = [] if tc is None else [(e.text or "") + " " + (e.get("message") or "") for e in tc]
        if not any(sub in t for t in texts):
            problems.append(f"{name}: no text containing {sub!r}")
    for p in problems:
        print("check_junit:", p)
    if not problems:
        print(f"check_junit: {a.file}: well-formed, {len(cases)} testcase(s), counts consistent")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
