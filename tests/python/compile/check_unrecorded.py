"""A step compiled by a backend that records no evidence (torch.compile by
name: its default, Inductor, or here "aot_eager", which compiles in
seconds) is never judged silently: its verdict's reason says that N
compiled region calls ran without evidence and how to get it, for the
plain torch.compile baseline family and the checkpoint judged against it
alike (docs/compile.md). Exit 1 naming what differs."""
import re
import sys
import tempfile

import torch
from compile_cases import Net, checkpointed, then

import ckpt_verify

NOTE = (r"\[torch[.]compile: {n} compiled region call\(s\) ran with a backend that records no evidence "
        r"\(torch[.]compile's default or another\): what its partitioner saved and recomputed is not judged; "
        r"compile with backend=ckpt_verify[.]compile_evidence[.]backend\(\"inductor\"\) to have it judged\]")


def by_name(model):
    return torch.compile(model, backend="aot_eager")


def main():
    R = ckpt_verify.Run
    with tempfile.TemporaryDirectory() as tmp:
        report = ckpt_verify.verify(
            lambda: Net(0.0, 32, 2), lambda step: (torch.randn(4, 16, 32), torch.randn(4, 16, 32)),
            {"by_name": R(prepare=then(checkpointed, by_name), against="compiled"),
             "eager_checkpoint": R(prepare=checkpointed)},
            baselines={"compiled": R(prepare=by_name)}, out=f"{tmp}/unrecorded.h5", steps=2, name="unrecorded")
        print(report)
        bad = []
        for name, note in (("by_name", NOTE.format(n=1)), ("by_name_vs_eager", NOTE.format(n=1)),
                           ("eager_checkpoint", None)):
            got = report.verdicts[name]
            if got.verdict != "PASS":
                bad.append(f"{name}: {got.verdict}, expected PASS: {got.reason}")
            elif note and not re.search(note, got.reason):
                bad.append(f"{name}: reason {got.reason!r} does not say that no evidence was recorded")
            elif not note and "records no evidence" in got.reason:
                bad.append(f"{name}: an eager run says {got.reason!r}")
    for line in bad:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
