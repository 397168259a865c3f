#!/usr/bin/env python3
"""check_walkthrough.py OUT_DIR: the first Python block of
docs/external.md ("From zero") runs as written, prints mine: PASS with
what was expected, and writes its report under reports/."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(ROOT, "docs", "external.md"), encoding="utf-8") as f:
        code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
    with open(os.path.join(out_dir, "walkthrough.py"), "w", encoding="utf-8") as f:
        f.write(code)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "walkthrough.py"], cwd=out_dir, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.rstrip())
    if not os.path.isfile(os.path.join(out_dir, "reports", "mine.h5")):
        print("check_walkthrough: no reports/mine.h5 written", file=sys.stderr)
        return 1
    wanted = "mine: PASS (expected PASS|NOISE): bitwise identical"
    if p.returncode != 0 or not re.search("^" + re.escape(wanted), p.stdout, re.M):
        print(f"check_walkthrough: exit {p.returncode}; '{wanted}' wanted", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
