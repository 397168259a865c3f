"""check_verify_page.py REPORT.h5 JUDGE_DIR: verify(out=REPORT.h5) left the
judge's page beside its summary: JUDGE_DIR/report.html, naming every run
the summary judged with the verdict it got, and Report.html points at it."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ckpt_verify.report import Report  # noqa: E402


def main() -> int:
    h5, judge_dir = sys.argv[1], sys.argv[2]
    page = os.path.join(judge_dir, "report.html")
    if not os.path.isfile(page):
        print(f"FAIL: verify(out={h5}) wrote no {page}")
        return 1
    if Report(h5, judge_dir, {}, 0, "", {}, "").html != page:
        print(f"FAIL: Report.html does not name {page}")
        return 1
    with open(os.path.join(judge_dir, "summary.json")) as f:
        records = json.load(f)["records"]
    with open(page, encoding="utf-8") as f:
        text = f.read()
    for r in records:
        row = f'data-verdict="{r["verdict"]}" data-expected="{int(r["expected"])}" data-case="{r["case"]}" ' \
              f'data-impl="{r["impl"]}"'
        if row not in text:
            print(f"FAIL: {page} has no row for {r['case']}/{r['impl']} {r['verdict']}")
            return 1
    print(f"{page}: {len(records)} judged run(s), each with its verdict")
    return 0


if __name__ == "__main__":
    sys.exit(main())
