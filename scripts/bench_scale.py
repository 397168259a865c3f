#!/usr/bin/env python3
"""The scale benchmark (issue 30, docs/scale.md): verify() on GPT-2-shaped
models from ~10 M to 350 M parameters against plain training. A thin
command line over python/ckpt_verify/bench_scale.py:

    scripts/python scripts/bench_scale.py --out DIR [--sizes 10M,30M,124M,350M]
        [--before OTHER_CHECKOUT/python --before-sizes 10M,30M,124M] [--check]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from ckpt_verify import bench_scale  # noqa: E402

if __name__ == "__main__":
    sys.exit(bench_scale.main())
