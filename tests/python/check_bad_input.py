#!/usr/bin/env python3
"""check_bad_input.py CASE ERROR_CLASS OUT_DIR: the bad input in
tests/python/bad_inputs/CASE.py must raise ckpt_verify.ERROR_CLASS from
verify() and make `python -m ckpt_verify` exit 2 naming it, both times
writing nothing (no report, no temporary, no judge output)."""
import os
import runpy
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
sys.path.insert(0, PYTHON_DIR)


def main():
    case, error_name, out_dir = sys.argv[1:4]
    import ckpt_verify
    error = getattr(ckpt_verify, error_name)
    script = os.path.join(HERE, "bad_inputs", f"{case}.py")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "report.h5")
    problems = []

    defs = runpy.run_path(script)
    try:
        ckpt_verify.verify(defs["model_fn"], defs["batch_fn"], defs["runs"], baseline=defs["baseline"], out=out)
        problems.append(f"verify() raised nothing, {error_name} expected")
    except error as e:
        print(f"verify() raised {type(e).__name__}: {e}")
    if os.listdir(out_dir):
        problems.append(f"verify() wrote {os.listdir(out_dir)}")

    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "ckpt_verify", "--out", out, script], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout.rstrip())
    if p.returncode != 2:
        problems.append(f"python -m ckpt_verify exited {p.returncode}, 2 expected")
    if f"({error_name})" not in p.stdout or "nothing written" not in p.stdout:
        problems.append(f"python -m ckpt_verify did not name {error_name} and say nothing was written")
    if os.listdir(out_dir):
        problems.append(f"python -m ckpt_verify wrote {os.listdir(out_dir)}")
    for p in problems:
        print(f"check_bad_input: {case}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
