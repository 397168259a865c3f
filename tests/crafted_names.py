"""crafted_names.py SRC_DIR DST_DIR: copies SRC_DIR/summary.json to
DST_DIR/summary.json with every case name replaced by one holding what a
data file or gnuplot's text can trip on: double and single quotes, a line
break, a tab, braces, ^ and _ (enhanced text) and a backslash."""
import json
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(os.path.join(src, "summary.json")) as f:
    doc = json.load(f)
for i, rec in enumerate(doc["records"]):
    rec["case"] = 'crafted "%d"\n it\'s\t{a}_^b\\' % (i // 2)
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "summary.json"), "w") as f:
    json.dump(doc, f)
