"""pytest: a verdict's reason is never cut (issue 48). A run that raises
with a message of more than 8 KB is ERROR with that whole message as its
reason, in Verdict.reason, summary.json, the JUnit error's message and
report.html alike, and so does one of 100 KB (stored variable-length, past
what an HDF5 object header holds); a user's run whose memory could not be judged, for a
reason longer than 8000 characters (a meter's build log), carries that
reason whole in summary.json. Before, the judge read a run's strings up to
8191 bytes and refused a longer one, so the producer cut them at 8000."""
import html
import json
import os
import sys
import xml.etree.ElementTree as ET

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify.memory import NoMeter  # noqa: E402

# 12,000 characters of words, and a tail that must survive to every output.
LONG = " ".join(f"part{i:06d}" for i in range(1100)) + " THE-END-OF-THE-REASON"


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return F.mse_loss(self.fc(x), torch.zeros_like(x))


def raising_step(model, batch):
    raise RuntimeError(LONG)


def checkpointed_step(model, batch):
    return checkpoint(model, batch, use_reentrant=False)


def records_of(report, run):
    with open(os.path.join(report.judge_dir, "summary.json"), encoding="utf-8") as f:
        return [r for r in json.load(f)["records"] if r.get("impl") == run or r.get("run") == run]


def test_a_reason_longer_than_8_kb_reaches_every_output_whole(tmp_path):
    assert len(LONG.encode()) > 8192
    out = str(tmp_path / "long.h5")
    # Not expected: the JUnit record is an <error> whose message is the reason.
    report = ckpt_verify.verify(Tiny, lambda step: torch.randn(2, 4), {"long": raising_step}, out=out)
    v = report.verdicts["long"]
    assert v.verdict == "ERROR"
    assert LONG in v.reason, f"Verdict.reason is {len(v.reason)} characters, cut: ...{v.reason[-80:]!r}"
    records = records_of(report, "long")
    assert records and LONG in records[0]["reason"]
    cases = [c for c in ET.parse(os.path.join(report.judge_dir, "junit.xml")).iter("testcase")
             if c.get("name", "").endswith("long")]
    assert cases, "no JUnit testcase for the run"
    errors = [e for c in cases for e in list(c) if e.tag in ("error", "failure")]
    assert errors and LONG in errors[0].get("message", ""), "the JUnit error's message lost the reason's end"
    with open(os.path.join(report.judge_dir, "report.html"), encoding="utf-8") as f:
        assert LONG in html.unescape(f.read())


def test_a_message_longer_than_an_hdf5_object_header_reaches_the_reason_whole(tmp_path):
    # 100 KB: past the 64 KiB HDF5 keeps of a fixed-length attribute's value.
    huge = " ".join(f"word{i:06d}" for i in range(10000)) + " THE-END-OF-A-100-KB-REASON"

    def raising(model, batch):
        raise RuntimeError(huge)

    report = ckpt_verify.verify(Tiny, lambda step: torch.randn(2, 4), {"huge": raising},
                                out=str(tmp_path / "huge.h5"), expect={"huge": "ERROR"})
    assert len(huge.encode()) > 65536
    assert huge in report.verdicts["huge"].reason
    assert huge in records_of(report, "huge")[0]["reason"]


def test_a_memory_statement_longer_than_8000_characters_is_whole_in_summary_json(tmp_path, monkeypatch):
    # What a meter that could not be built says (its compiler's output): long.
    why = "CPU memory cannot be measured: " + LONG
    verify_module = sys.modules["ckpt_verify.verify"]
    monkeypatch.setattr(verify_module, "meter_for", lambda device, judge_path=None: NoMeter(why))
    out = str(tmp_path / "memory.h5")
    report = ckpt_verify.verify(Tiny, lambda step: torch.randn(2, 4), {"mine": checkpointed_step}, out=out)
    records = records_of(report, "mine")
    assert records, "no summary record for the run"
    assert records[0].get("memory") == f"not judged: {why}", \
        f"summary.json's memory is {len(records[0].get('memory') or '')} characters"
    assert why in records[0]["reason"]
