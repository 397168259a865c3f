"""A step compiled by a backend whose graphs ckpt_verify does not read (a
user's own AOTAutograd backend here; torch.compile's default Inductor and
aot_eager are recorded, by name or not) is never judged silently: its
verdict's reason says that N compiled region calls ran without evidence,
for the plain torch.compile baseline family and the checkpoint judged
against it alike (docs/compile.md). Exit 1 naming what differs."""
import re
import sys
import tempfile

import torch
from compile_cases import Net, checkpointed, then
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

import ckpt_verify

NOTE = (r"\[torch[.]compile: {n} compiled region call\(s\) ran with a backend whose graphs are not read \(only "
        r"Inductor's, torch[.]compile's default, and aot_eager's are\): what its partitioner saved and recomputed is "
        r"not judged\]")


def _nop(gm, example_inputs):
    return make_boxed_func(gm.forward)


# A user's own backend: AOTAutograd's default partitioner, the graphs run as they are.
OWN = aot_autograd(fw_compiler=_nop)


def by_name(model):
    return torch.compile(model, backend=OWN)


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
            elif not note and "graphs are not read" in got.reason:
                bad.append(f"{name}: an eager run says {got.reason!r}")
    for line in bad:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
