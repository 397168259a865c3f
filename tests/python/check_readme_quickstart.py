#!/usr/bin/env python3
"""check_readme_quickstart.py OUT_DIR: README's first Python block is
python/examples/quickstart.py's code (after its docstring), and that file
runs as written in a fresh directory: its own `assert report` holds, and
the table shows mine PASS and no_rng FAIL, both as expected."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "python", "examples", "quickstart.py")


def main() -> int:
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme_code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
    with open(EXAMPLE, encoding="utf-8") as f:
        example = f.read()
    example_code = re.sub(r'^""".*?"""\n', "", example, count=1, flags=re.S)
    if readme_code != example_code:
        print("check_readme_quickstart: README.md's first Python block and python/examples/quickstart.py differ",
              file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, EXAMPLE], cwd=out_dir, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.rstrip())
    wanted = [r"^\s+mine\s+PASS\s+yes\s", r"^\s+no_rng\s+FAIL\s+yes\s", r"all verdicts as expected"]
    missing = [w for w in wanted if not re.search(w, p.stdout, re.M)]
    if p.returncode != 0 or missing:
        print(f"check_readme_quickstart: exit {p.returncode}; missing from the output: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
