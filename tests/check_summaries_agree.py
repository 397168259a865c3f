"""check_summaries_agree.py A/summary.json B/summary.json [--min-records N] [--kinds V,V]:
two judgements of the same reports agree record for record: verdict,
expectation, reason and first divergence of every (case, run). Exit 1 naming
the records that differ, when the counts differ, when there are fewer than
N records, or when a verdict of --kinds is missing from them (a comparison
of too little proves nothing)."""
import argparse
import json
import sys


def records(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return {(r["case"], r["impl"]): (r["verdict"], r["expected"], r["reason"], r["first_divergence"])
                for r in json.load(f)["records"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--min-records", type=int, default=10)
    ap.add_argument("--kinds", default="", help="verdicts that must appear, comma-separated")
    args = ap.parse_args()
    a, b = records(args.a), records(args.b)
    differ = [k for k in a if a[k] != b.get(k)]
    kinds = {v[0] for v in a.values()}
    print(len(a), "records", sorted(kinds))
    if differ or len(a) != len(b):
        sys.exit(f"differ: {differ} ({len(a)} against {len(b)} records)")
    if len(a) < args.min_records:
        sys.exit(f"too few records: {len(a)}")
    missing = {k for k in args.kinds.split(",") if k} - kinds
    if missing:
        sys.exit(f"no record has verdict {sorted(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
