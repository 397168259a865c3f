"""pytest: a verdict's reason is never cut (issue 48). A run that raises
with a message of more than 2 KB is ERROR with that whole message as its
reason, in Verdict.reason, summary.json, junit.xml and report.html alike;
before, the judge kept 511 bytes of a run's message and of a reason."""
import html
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402

# 3000 characters of words, and a tail that must survive to every output.
LONG = " ".join(f"part{i:04d}" for i in range(330)) + " THE-END-OF-THE-REASON"


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return F.mse_loss(self.fc(x), torch.zeros_like(x))


def raising_step(model, batch):
    raise RuntimeError(LONG)


def test_a_reason_longer_than_2_kb_reaches_every_output_whole(tmp_path):
    assert len(LONG) > 2048
    out = str(tmp_path / "long.h5")
    report = ckpt_verify.verify(Tiny, lambda step: torch.randn(2, 4), {"long": raising_step}, out=out,
                                expect={"long": "ERROR"})
    v = report.verdicts["long"]
    assert v.verdict == "ERROR"
    assert LONG in v.reason, f"Verdict.reason is {len(v.reason)} characters, cut: ...{v.reason[-80:]!r}"
    with open(os.path.join(report.judge_dir, "summary.json"), encoding="utf-8") as f:
        records = [r for r in json.load(f)["records"] if r.get("impl") == "long" or r.get("run") == "long"]
    assert records and LONG in records[0]["reason"]
    with open(os.path.join(report.judge_dir, "junit.xml"), encoding="utf-8") as f:
        assert LONG in html.unescape(f.read())
    with open(os.path.join(report.judge_dir, "report.html"), encoding="utf-8") as f:
        assert LONG in html.unescape(f.read())
