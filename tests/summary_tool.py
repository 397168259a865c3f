#!/usr/bin/env python3
"""summary_tool.py: small edits and checks on summary.json files for the
CTest integration tests of the nightly mode.

  set-verdict SRC_DIR DST_DIR CASE IMPL VERDICT
      copies SRC_DIR/summary.json to DST_DIR/summary.json with that record's
      verdict replaced (a planted "previous run" for --compare-to).
  same-verdicts A_DIR B_DIR
      exit 0 when both summaries hold the same case/impl records, in the same
      order, with the same verdicts; otherwise lists the differences, exit 1.
  craft DST_DIR
      writes a summary.json holding one record of every junit outcome and
      text that XML must escape, for the junit.xml checks.
  ratios-match DIR FAMILY
      exit 0 when every record's overhead is its step_ms over the
      baseline_step_ms it records, and every record whose impl starts with
      FAMILY's producer prefix names an overhead_baseline of FAMILY.
  holds-its-reports DIR
      exit 0 when every record with an h5 names a file by a path relative to
      DIR that exists in DIR (a run directory that can be moved whole), and
      at least one record has one."""
import json
import os
import sys


def load(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


def save(doc, d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(doc, f, indent=2)


def set_verdict(src, dst, case, impl, verdict):
    doc = load(src)
    hits = [r for r in doc["records"] if r["case"] == case and r["impl"] == impl]
    if len(hits) != 1:
        sys.exit(f"summary_tool: {case}/{impl}: {len(hits)} records in {src}")
    print(f"summary_tool: {case}/{impl}: {hits[0]['verdict']} -> {verdict} in {dst}")
    hits[0]["verdict"] = verdict
    save(doc, dst)


def same_verdicts(a, b):
    ra = [(r["case"], r["impl"], r["verdict"]) for r in load(a)["records"]]
    rb = [(r["case"], r["impl"], r["verdict"]) for r in load(b)["records"]]
    if ra == rb:
        print(f"summary_tool: {len(ra)} records, same order and verdicts")
        return 0
    print(f"summary_tool: {len(ra)} vs {len(rb)} records")
    for x, y in zip(ra, rb):
        if x != y:
            print("  differ:", x, y)
    return 1


def craft(dst):
    nasty = "a<b & c>d \"quoted\" 'single' \x01ctl\ttab\nnewline ]]> \u00e9\u4e2d"

    def rec(case, impl, verdict, expected, reason, **more):
        r = {"case": case, "impl": impl, "verdict": verdict, "expected": expected, "reason": reason,
             "first_divergence": "", "max_scaled_ulp": 0, "raw_max_ulp": 0, "memory_saved": 0.25, "overhead": 1.5,
             "case_seconds": 0.5}
        r.update(more)
        return r

    doc = {"schema_version": 1, "harness_version": "0", "git_rev": "abc<1>", "libtorch_version": "x",
           "created_utc": "2026-01-01T00:00:00Z", "suite": "nightly",
           "records": [
               rec("ok_case", "reentrant", "PASS", True, "bitwise identical"),
               rec("ok_case", "nonreentrant", "NOISE", True, "within the noise floor", max_scaled_ulp=2.5,
                   raw_max_ulp=1648106509),
               rec("bug_case", "no_rng_stash", "FAIL", True, "caught", max_scaled_ulp=None, raw_max_ulp=None,
                   first_divergence="steps/1/grads/l0.weight [0, 0]"),
               rec("bug_case", "stale_input", "PASS", False, "planted bug not caught"),
               rec("bad_case", "reentrant", "FAIL", False, nasty, max_scaled_ulp=3e6, raw_max_ulp=999,
                   first_divergence="steps/2/grads/l1.bias [3] <&>"),
               rec("mem_case", "recompute_elided", "MEMFAIL", False, "memory saved 0.0% < required 30.0%"),
               rec("err_case", "*", "ERROR", False, "cannot run: <oops>"),
               rec("dropout0", "no_rng_stash", "NOT_OBSERVABLE", True, "no dropout: cannot show"),
           ]}
    save(doc, dst)
    return 0


def ratios_match(d, family):
    bad = []
    prefix = family.split("_baseline")[0] + "_"
    for r in load(d)["records"]:
        over, step, base = r.get("overhead"), r.get("step_ms"), r.get("baseline_step_ms")
        name = r.get("overhead_baseline", "")
        if over is not None and (step is None or not base or abs(over - step / base) > 1e-9 * over):
            bad.append("%s/%s: overhead %r is not step_ms %r / baseline_step_ms %r" % (r["case"], r["impl"], over,
                                                                                    step, base))
        if r["impl"].startswith(prefix) and not name.startswith(family):
            bad.append("%s/%s: overhead_baseline %r is not of %s" % (r["case"], r["impl"], name, family))
    print("\n".join(bad) or "every overhead divides by the baseline it records")
    return 1 if bad else 0


def holds_its_reports(d):
    bad, held = [], 0
    for r in load(d)["records"]:
        h5 = r.get("h5")
        if h5 is None:
            continue
        if os.path.isabs(h5) or "/" in h5 or not os.path.isfile(os.path.join(d, h5)):
            bad.append("%s/%s: h5 %r is not a file of %s" % (r["case"], r["impl"], h5, d))
        held += 1
    if not held:
        bad.append("no record names a report: the check proves nothing")
    print("\n".join(bad) or "%d record(s), each with its report in %s" % (held, d))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 7 and argv[1] == "set-verdict":
        set_verdict(*argv[2:])
        return 0
    if len(argv) == 4 and argv[1] == "same-verdicts":
        return same_verdicts(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "ratios-match":
        return ratios_match(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "holds-its-reports":
        return holds_its_reports(argv[2])
    if len(argv) == 3 and argv[1] == "craft":
        return craft(argv[2])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
