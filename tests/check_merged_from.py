"""check_merged_from.py SUMMARY N: the merged summary lists N inputs in
merged_from, and a directory name that is not UTF-8 is kept with its
bytes escaped (\\xNN), not dropped."""
import json
import sys

summary, n = sys.argv[1], int(sys.argv[2])
dirs = [m["dir"] for m in json.load(open(summary))["merged_from"]]
print(dirs)
sys.exit(0 if len(dirs) == n and any(d.endswith("sh\\xffard") for d in dirs) else 1)
