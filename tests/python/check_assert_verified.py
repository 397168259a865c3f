#!/usr/bin/env python3
"""assert_verified() for pytest: the planted RNG bug, not declared as
expected, must raise VerificationFailed (an AssertionError) naming it;
declared (expect=), the same runs must pass and return the report."""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "examples")]

import planted_no_rng_stash as ex  # noqa: E402

import ckpt_verify  # noqa: E402


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="ckpt_verify_assert.")
    os.makedirs(out_dir, exist_ok=True)
    args = (ex.model_fn, ex.batch_fn, ex.runs)
    kwargs = {"steps": ex.steps}
    try:
        ckpt_verify.assert_verified(*args, baseline=ex.baseline, out=os.path.join(out_dir, "undeclared.h5"),
                                     **kwargs)
        print("check_assert_verified: an undeclared FAIL passed assert_verified", file=sys.stderr)
        return 1
    except AssertionError as e:
        if not isinstance(e, ckpt_verify.VerificationFailed) or "py_reentrant_no_rng_stash: FAIL" not in str(e):
            print(f"check_assert_verified: wrong failure: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(f"undeclared: {e}")
    report = ckpt_verify.assert_verified(*args, baseline=ex.baseline, expect=ex.expect,
                                         out=os.path.join(out_dir, "declared.h5"), **kwargs)
    print(f"declared:\n{report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
