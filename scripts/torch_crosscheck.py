#!/usr/bin/env python3
"""Runs ckpt-verify cases again in PyTorch with torch.utils.checkpoint, from
nothing but their HDF5 reports, and compares each pair with `ckpt-verify
diff` (--check). The logic is ckpt_verify.crosscheck; see its docstring.

    torch_crosscheck.py REPORT.h5... [-o OUT.h5 | --out-dir DIR] [--check CKPT_VERIFY]
                        [--rules torch|harness] [--plant KIND] [--selective]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ckpt_verify.crosscheck import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
